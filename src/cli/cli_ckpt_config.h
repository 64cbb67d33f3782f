/* A checkpoint's saved config made loadable by a job other than the
 * training (`fabula eval`, `fabula generate`). */
#ifndef FABULA_CLI_CKPT_CONFIG_H
#define FABULA_CLI_CKPT_CONFIG_H

/* json_text: the effective config (ckpt names it in messages). For a job of
 * `world` processes: train_batch_size dropped and one accumulation step,
 * so the batch triple re-derives for this world; an expert-parallel size
 * that does not divide it becomes 1; with from_ckpt, model.init_from is
 * dropped (the checkpoint holds the weights and the complete model
 * section). Returns a path for config_load, a /dev/fd of an unlinked
 * temporary file, whose descriptor is *fd_out: close it after loading. */
char *cli_checkpoint_config_file(const char *json_text, const char *ckpt, int world, int *fd_out, int from_ckpt);

#endif
