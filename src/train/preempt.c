#include "train/preempt.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "parallel/comm.h"
#include "util/error.h"

static volatile sig_atomic_t signalled;

static void on_signal(int sig)
{
    if (!signalled)
        signalled = sig;
}

void preempt_install(const int *sigs, int n)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    CHECK_SYS(sigemptyset(&sa.sa_mask));
    /* MPI and file calls interrupted by the signal resume */
    sa.sa_flags = SA_RESTART;
    for (int i = 0; i < n; i++)
        if (sigs[i] != SIGINT)
            CHECK_SYS(sigaction(sigs[i], &sa, NULL));
    /* Ctrl-C always, listed or not; after the first Ctrl-C the default action is back: the second ends
     * the process at once */
    sa.sa_flags = SA_RESTART | SA_RESETHAND;
    CHECK_SYS(sigaction(SIGINT, &sa, NULL));
    struct sigaction ign;
    memset(&ign, 0, sizeof ign);
    ign.sa_handler = SIG_IGN;
    CHECK_SYS(sigemptyset(&ign.sa_mask));
    CHECK_SYS(sigaction(SIGXFSZ, &ign, NULL));
}

int preempt_pending(void) { return signalled; }

int preempt_agree(void)
{
    long long sig = signalled;
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
