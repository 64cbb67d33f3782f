/* "monitor" (fabula's block) and DeepSpeed's top-level wall_clock_breakdown:
 * what the step monitor measures and prints (docs/monitoring.md). */
#include <math.h>

#include "config/config_internal.h"

void config_read_monitor(cj_ctx_t *c, config_t *cfg, int world_size)
{
    monitor_config_t *m = &cfg->monitor;
    m->wall_clock_breakdown = cj_bool(c, "wall_clock_breakdown", 0);
    cj_section(c, "monitor");
    m->enabled = cj_bool(c, "monitor.enabled", 1);
    m->verbose = cj_bool(c, "monitor.verbose", 0);
    m->peak_flops = cj_real(c, "monitor.peak_flops", 0.0);
    if (!(m->peak_flops >= 0.0) || !isfinite(m->peak_flops))
        cj_invalid(c, "monitor.peak_flops", "a number >= 0 (FLOP/s of one rank's device; 0 = the backend's "
                                            "default: measured sgemm peak on the CPU, the bf16 table on GPUs)");
    m->debug_delay_rank = cj_int(c, "monitor.debug_delay_rank", -1);
    if (m->debug_delay_rank < -1)
        cj_invalid(c, "monitor.debug_delay_rank", "a rank >= 0, or -1 for every rank");
    m->debug_delay_s = cj_real(c, "monitor.debug_delay_s", 0.0);
    if (!(m->debug_delay_s >= 0.0 && m->debug_delay_s <= 3600.0))
        cj_invalid(c, "monitor.debug_delay_s", "seconds from 0 to 3600 (sleep added to each step's compute)");
    m->debug_delay_data_s = cj_real(c, "monitor.debug_delay_data_s", 0.0);
    if (!(m->debug_delay_data_s >= 0.0 && m->debug_delay_data_s <= 3600.0))
        cj_invalid(c, "monitor.debug_delay_data_s", "seconds from 0 to 3600 (sleep added to each step's data phase)");
    m->hang_check = cj_bool(c, "monitor.hang_check", 1);
    m->hang_factor = cj_real(c, "monitor.hang_factor", 10.0);
    if (!(m->hang_factor >= 2.0 && m->hang_factor <= 1e6))
        cj_invalid(c, "monitor.hang_factor", "a number from 2 to 1e6 (a step past this many median step times is hung)");
    m->hang_min_s = cj_real(c, "monitor.hang_min_s", 300.0);
    if (!(m->hang_min_s >= 1.0 && m->hang_min_s <= 1e6))
        cj_invalid(c, "monitor.hang_min_s", "seconds from 1 to 1e6 (the least time before a step is called hung)");
    m->hang_first_s = cj_real(c, "monitor.hang_first_s", 1800.0);
    if (!(m->hang_first_s >= 1.0 && m->hang_first_s <= 1e6))
        cj_invalid(c, "monitor.hang_first_s", "seconds from 1 to 1e6 (the bound before a step time is known)");
    m->debug_hang_step = cj_int(c, "monitor.debug_hang_step", 0);
    if (m->debug_hang_step < 0)
        cj_invalid(c, "monitor.debug_hang_step", "a step >= 1, or 0 for never");
    if (m->debug_hang_step > 0 && m->debug_delay_rank < 0)
        cj_invalid(c, "monitor.debug_hang_step", "needs monitor.debug_delay_rank, the rank that hangs");
    if (m->debug_delay_rank >= world_size)
        cj_invalid(c, "monitor.debug_delay_rank", "a rank below the world size (%d ranks), or -1 for every rank",
                   world_size);
}
