/*
 * startup-timer: how much an LD_PRELOAD interposer adds to a program's
 * start, side by side (docs/PERFORMANCE.md, "Start-up under the interposer").
 *
 *   cc -O2 -o startup-timer scripts/startup-timer.c
 *   PLFSRC=... ./startup-timer RUNS warm|cold VARIANT... -- PROGRAM ARGS...
 *
 * A VARIANT is an interposer to put in LD_PRELOAD, or "-" for none (the
 * plain program). Every round runs each variant once (fork, execve, wait4,
 * stdout to /dev/null), starting from a different variant each round so no
 * variant always runs first; "cold" syncs and writes 3 to
 * /proc/sys/vm/drop_caches (root only) before every run. Wall time scatters
 * by milliseconds on a loaded machine, so besides the wall time of each run
 * it reports what the load does not inflate: the child's CPU time (user +
 * sys), its major page faults and the blocks it read from disk (wait4's
 * ru_majflt and ru_inblock, 512-byte units); and for every variant after
 * the first, the median and p10 / p90 of its pairwise wall and CPU
 * differences to the first variant in the same round.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

struct sample {
    double wall_ms, cpu_ms, majflt, inblock;
};

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static void drop_caches(void)
{
    sync();
    int fd = open("/proc/sys/vm/drop_caches", O_WRONLY);
    if (fd < 0 || write(fd, "3", 1) != 1) {
        perror("startup-timer: /proc/sys/vm/drop_caches (cold needs root)");
        exit(2);
    }
    close(fd);
}

static struct sample run(char **argv, char **env, int cold)
{
    if (cold)
        drop_caches();
    double t0 = now_ms();
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open("/dev/null", O_WRONLY);
        dup2(fd, 1);
        execve(argv[0], argv, env);
        _exit(127);
    }
    int status;
    struct rusage ru;
    wait4(pid, &status, 0, &ru);
    struct sample s;
    s.wall_ms = now_ms() - t0;
    s.cpu_ms = ru.ru_utime.tv_sec * 1e3 + ru.ru_utime.tv_usec / 1e3 +
               ru.ru_stime.tv_sec * 1e3 + ru.ru_stime.tv_usec / 1e3;
    s.majflt = ru.ru_majflt;
    s.inblock = ru.ru_inblock;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "startup-timer: %s exited with status %d\n", argv[0], status);
        exit(1);
    }
    return s;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Sorts v in place; p is 0.5 for the median, 0.1 for p10 ... */
static double quantile(double *v, int n, double p)
{
    qsort(v, n, sizeof *v, by_value);
    int i = (int)(p * (n - 1) + 0.5);
    return v[i];
}

int main(int argc, char **argv)
{
    if (argc < 6) {
        fprintf(stderr, "usage: %s RUNS warm|cold VARIANT... -- PROGRAM ARGS...\n", argv[0]);
        return 2;
    }
    int runs = atoi(argv[1]);
    int cold = strcmp(argv[2], "cold") == 0;
    int first = 3, k = 0;
    while (first + k < argc && strcmp(argv[first + k], "--") != 0)
        k++;
    if (runs < 1 || k < 1 || first + k + 1 >= argc) {
        fprintf(stderr, "usage: %s RUNS warm|cold VARIANT... -- PROGRAM ARGS...\n", argv[0]);
        return 2;
    }
    char **variants = argv + first;
    char **program = argv + first + k + 1;

    int n_env = 0;
    while (environ[n_env])
        n_env++;
    char ***envs = calloc(k, sizeof *envs);
    for (int v = 0; v < k; v++) {
        envs[v] = calloc(n_env + 2, sizeof(char *));
        int j = 0;
        for (int e = 0; e < n_env; e++)
            if (strncmp(environ[e], "LD_PRELOAD=", 11) != 0)
                envs[v][j++] = environ[e];
        if (strcmp(variants[v], "-") != 0) {
            size_t len = strlen(variants[v]) + 12;
            envs[v][j] = malloc(len);
            snprintf(envs[v][j], len, "LD_PRELOAD=%s", variants[v]);
        }
    }

    struct sample *s = calloc((size_t)runs * k, sizeof *s);
    /* A few warm runs first, so the first measured run pays no more than
     * the rest (warm) or the cache drop makes them irrelevant (cold). */
    for (int v = 0; v < k; v++)
        run(program, envs[v], 0);
    for (int r = 0; r < runs; r++)
        for (int i = 0; i < k; i++) {
            int v = (r + i) % k;
            s[r * k + v] = run(program, envs[v], cold);
        }

    double *col = calloc(runs, sizeof *col);
    printf("%s %s, %d rounds, load average:", cold ? "cold" : "warm", program[0], runs);
    FILE *load = fopen("/proc/loadavg", "r");
    char line[128] = "?";
    if (load && fgets(line, sizeof line, load))
        printf(" %s", line);
    else
        printf(" ?\n");
    if (load)
        fclose(load);
    for (int v = 0; v < k; v++) {
        printf("%-40s", variants[v]);
#define COLUMN(field, name, fmt)                                      \
    do {                                                              \
        for (int r = 0; r < runs; r++)                                \
            col[r] = s[r * k + v].field;                              \
        double lo = quantile(col, runs, 0.1), hi = quantile(col, runs, 0.9); \
        printf(" " name " " fmt " [" fmt ", " fmt "]", quantile(col, runs, 0.5), lo, hi); \
    } while (0)
        COLUMN(wall_ms, "wall", "%.2f");
        COLUMN(cpu_ms, "cpu", "%.2f");
        COLUMN(majflt, "majflt", "%.0f");
        COLUMN(inblock, "inblock", "%.0f");
        printf("\n");
    }
    for (int v = 1; v < k; v++) {
        printf("%s - %s:", variants[v], variants[0]);
        for (int r = 0; r < runs; r++)
            col[r] = s[r * k + v].wall_ms - s[r * k].wall_ms;
        printf(" wall %+.2f ms [p10 %+.2f, p90 %+.2f]", quantile(col, runs, 0.5),
               quantile(col, runs, 0.1), quantile(col, runs, 0.9));
        for (int r = 0; r < runs; r++)
            col[r] = s[r * k + v].cpu_ms - s[r * k].cpu_ms;
        printf(" cpu %+.2f ms [p10 %+.2f, p90 %+.2f]", quantile(col, runs, 0.5),
               quantile(col, runs, 0.1), quantile(col, runs, 0.9));
        for (int r = 0; r < runs; r++)
            col[r] = s[r * k + v].inblock - s[r * k].inblock;
        printf(" inblock %+.0f [p10 %+.0f, p90 %+.0f]\n", quantile(col, runs, 0.5),
               quantile(col, runs, 0.1), quantile(col, runs, 0.9));
    }
    return 0;
}
