#include "train/preempt.h"

#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "parallel/comm.h"
#include "util/error.h"
#include "util/timer.h"

/* Every signal run.preempt_signals may name, and Ctrl-C. */
static const int candidates[] = {SIGUSR1, SIGUSR2, SIGTERM, SIGHUP, SIGXCPU, SIGINT};
#define NCAND ((int)(sizeof candidates / sizeof *candidates))
_Static_assert(SIGXCPU < 32 && SIGUSR2 < 32 && SIGTERM < 32, "a signal's bit fits an unsigned");

/* The actions before preempt_catch_early, given back to the signals the
 * config does not list. */
static struct sigaction saved[NCAND];
static int saved_valid;

/* Lock-free atomics: the handler may run on any thread, even two at once. */
static atomic_int signalled;        /* the first preempting signal, or 0 */
static atomic_uint early;           /* bits of the signals caught before preempt_install */
static atomic_uint armed;           /* bits of the signals that preempt */
static atomic_int installed;
static atomic_llong first_ctrl_c_ns;

/* Returns 1 when this SIGINT is a second Ctrl-C: one more than a second
 * after the first (the repeats of one key press arrive within ms). */
static int second_ctrl_c(void)
{
    const long long now = timer_now_ns();
    long long first = 0;
    if (atomic_compare_exchange_strong(&first_ctrl_c_ns, &first, now))
        return 0;
    return now - first >= (long long)(PREEMPT_CTRL_C_WINDOW_S * 1e9);
}

static void on_signal(int sig)
{
    const int saved_errno = errno;
    if (sig == SIGINT && second_ctrl_c()) {
        /* the default action, once this handler returns (SIGINT is
         * blocked while it runs): the process ends at once */
        struct sigaction dfl;
        memset(&dfl, 0, sizeof dfl);
        dfl.sa_handler = SIG_DFL;
        sigemptyset(&dfl.sa_mask);
        sigaction(SIGINT, &dfl, NULL);
        raise(SIGINT);
    } else if (!atomic_load(&installed)) {
        atomic_fetch_or(&early, 1u << sig);
    } else if (atomic_load(&armed) & (1u << sig)) {
        int none = 0;
        atomic_compare_exchange_strong(&signalled, &none, sig);
    }
    errno = saved_errno;
}

static struct sigaction our_action(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    CHECK_SYS(sigemptyset(&sa.sa_mask));
    /* MPI and file calls interrupted by the signal resume */
    sa.sa_flags = SA_RESTART;
    return sa;
}

void preempt_catch_early(void)
{
    /* once: a second call would save this handler as the one to give back */
    if (saved_valid)
        return;
    struct sigaction sa = our_action();
    for (int i = 0; i < NCAND; i++)
        CHECK_SYS(sigaction(candidates[i], &sa, &saved[i]));
    saved_valid = 1;
    struct sigaction ign;
    memset(&ign, 0, sizeof ign);
    ign.sa_handler = SIG_IGN;
    CHECK_SYS(sigemptyset(&ign.sa_mask));
    CHECK_SYS(sigaction(SIGXFSZ, &ign, NULL));
}

void preempt_install(const int *sigs, int n)
{
    unsigned arm = 1u << SIGINT;
    for (int i = 0; i < n; i++) {
        FB_ASSERT(sigs[i] > 0 && sigs[i] < 32);
        arm |= 1u << sigs[i];
    }
    atomic_store(&armed, arm);
    atomic_store(&installed, 1);
    struct sigaction sa = our_action();
    for (int i = 0; i < NCAND; i++) {
        const int sig = candidates[i];
        if (arm & (1u << sig)) {
            /* with SIGUSR1 listed this replaces MPICH's handler */
            CHECK_SYS(sigaction(sig, &sa, NULL));
            continue;
        }
        struct sigaction cur;
        CHECK_SYS(sigaction(sig, NULL, &cur));
        if (cur.sa_handler == on_signal && saved_valid)
            CHECK_SYS(sigaction(sig, &saved[i], NULL));
    }
    struct sigaction ign;
    memset(&ign, 0, sizeof ign);
    ign.sa_handler = SIG_IGN;
    CHECK_SYS(sigemptyset(&ign.sa_mask));
    CHECK_SYS(sigaction(SIGXFSZ, &ign, NULL));
    /* what arrived before the list was known: a listed signal preempts, any
     * other takes the action it has now (a SIGTERM left off the list: the
     * default, the end of the process) */
    const unsigned got = atomic_exchange(&early, 0u);
    for (int i = 0; i < NCAND; i++) {
        const int sig = candidates[i];
        if (!(got & (1u << sig)))
            continue;
        if (arm & (1u << sig)) {
            int none = 0;
            atomic_compare_exchange_strong(&signalled, &none, sig);
        } else {
            CHECK_SYS(raise(sig));
        }
    }
}

int preempt_pending(void) { return atomic_load(&signalled); }

int preempt_agree(void)
{
    long long sig = atomic_load(&signalled);
    comm_allreduce(comm_world(), &sig, 1, COMM_I64, COMM_MAX);
    return (int)sig;
}

const char *preempt_signal_name(int sig)
{
    static char other[32];
    switch (sig) {
    case SIGUSR1:
        return "SIGUSR1";
    case SIGUSR2:
        return "SIGUSR2";
    case SIGTERM:
        return "SIGTERM";
    case SIGHUP:
        return "SIGHUP";
    case SIGXCPU:
        return "SIGXCPU";
    case SIGINT:
        return "SIGINT";
    default:
        snprintf(other, sizeof other, "signal %d", sig);
        return other;
    }
}
