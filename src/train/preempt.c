#include "train/preempt.h"

#include <signal.h>
#include <string.h>

#include "parallel/comm.h"
#include "util/error.h"

static volatile sig_atomic_t signalled;

static void on_signal(int sig)
{
    (void)sig;
    signalled = 1;
}

void preempt_install(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    CHECK_SYS(sigemptyset(&sa.sa_mask));
    /* MPI and file calls interrupted by the signal resume */
    sa.sa_flags = SA_RESTART;
    CHECK_SYS(sigaction(SIGUSR1, &sa, NULL));
    CHECK_SYS(sigaction(SIGTERM, &sa, NULL));
    struct sigaction ign;
    memset(&ign, 0, sizeof ign);
    ign.sa_handler = SIG_IGN;
    CHECK_SYS(sigemptyset(&ign.sa_mask));
    CHECK_SYS(sigaction(SIGXFSZ, &ign, NULL));
}

int preempt_pending(void) { return signalled != 0; }

int preempt_agree(void)
{
    long long flag = signalled ? 1 : 0;
    comm_allreduce(comm_world(), &flag, 1, COMM_I64, COMM_MAX);
    return flag != 0;
}
