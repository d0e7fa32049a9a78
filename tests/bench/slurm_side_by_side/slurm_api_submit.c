/* Submissions per second through Slurm's own API (libslurm's slurm_submit_batch_job), the
 * counterpart of hetpool's tests/bench/submit_load: --clients threads submit held one-CPU jobs
 * (priority 0: queued, never started, as hetpool's stay pending without agents) for --seconds.
 * Built by run.py with `cc -O2 slurm_api_submit.c -lslurm -lpthread` (libslurm-dev).
 *   slurm_api_submit CLIENTS SECONDS   -> prints "submissions_per_second N"
 */
#include <pthread.h>
#include <slurm/slurm.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static atomic_long submitted, refused;
static double deadline;

static double Now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void* Client(void* unused) {
  (void)unused;
  char* environment[] = {"BENCH=1", NULL};
  while (Now() < deadline) {
    job_desc_msg_t job;
    slurm_init_job_desc_msg(&job);
    job.name = "api";
    job.script = "#!/bin/sh\ntrue\n";
    job.environment = environment;
    job.env_size = 1;
    job.work_dir = "/tmp";
    job.std_out = "/dev/null";
    job.min_cpus = 1;
    job.priority = 0; /* held */
    job.user_id = getuid();
    job.group_id = getgid();
    submit_response_msg_t* response = NULL;
    if (slurm_submit_batch_job(&job, &response) == SLURM_SUCCESS) {
      atomic_fetch_add(&submitted, 1);
    } else {
      atomic_fetch_add(&refused, 1);
    }
    if (response != NULL) slurm_free_submit_response_response_msg(response);
  }
  return NULL;
}

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: slurm_api_submit CLIENTS SECONDS\n");
    return 2;
  }
  const int clients = atoi(argv[1]);
  slurm_init(NULL);
  const double start = Now();
  deadline = start + atof(argv[2]);
  pthread_t threads[256];
  for (int i = 0; i < clients && i < 256; ++i) pthread_create(&threads[i], NULL, Client, NULL);
  for (int i = 0; i < clients && i < 256; ++i) pthread_join(threads[i], NULL);
  const double elapsed = Now() - start;
  printf("submissions_per_second %.1f refused %ld\n", (double)atomic_load(&submitted) / elapsed,
         atomic_load(&refused));
  slurm_fini();
  return 0;
}
