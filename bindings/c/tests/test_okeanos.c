/* The C ABI's test program, built and run by crates/okeanos-ffi/tests/c_abi.rs.
 *
 *   test_okeanos all DIR            every function, and every kind of bad input
 *   test_okeanos mkfs IMG BYTES [OPTIONS]
 *   test_okeanos append IMG N       N threads append 128-byte records with fdatasync forever,
 *                                   printing "ack T K" once record K of thread T is durable
 *   test_okeanos verify IMG ACKS    every acknowledged record in ACKS came back intact
 *   test_okeanos bench IMG OPTS N SECS  N threads append 128 B + fdatasync for SECS seconds;
 *                                   prints syncs/s (crates/okeanos-ffi/examples/appenders.rs
 *                                   is the same program in Rust)
 */
#define _GNU_SOURCE
#include "okeanos.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static int failures = 0;

#define CHECK(cond)                                                                        \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            fprintf(stderr, "%s:%d: CHECK(%s) failed; okeanos_errmsg: %s\n", __FILE__,     \
                    __LINE__, #cond, okeanos_errmsg());                                    \
            failures++;                                                                    \
        }                                                                                  \
    } while (0)

/* A call that must fail with `err` and leave a sentence. */
#define FAILS(expr, err)                                                                   \
    do {                                                                                   \
        long long r_ = (long long)(expr);                                                  \
        if (r_ != -(err)) {                                                                \
            fprintf(stderr, "%s:%d: %s returned %lld, not -%s\n", __FILE__, __LINE__,      \
                    #expr, r_, #err);                                                      \
            failures++;                                                                    \
        } else if (okeanos_errmsg()[0] == 0) {                                             \
            fprintf(stderr, "%s:%d: %s failed without a message\n", __FILE__, __LINE__,    \
                    #expr);                                                                \
            failures++;                                                                    \
        }                                                                                  \
    } while (0)

#define RECORD 128

/* Record K of thread T: recognisable and checkable byte by byte. */
static void make_record(char *buf, int t, long k) {
    memset(buf, 'a' + (int)((t + k) % 26), RECORD);
    snprintf(buf, RECORD, "t=%d k=%ld ", t, k);
    buf[RECORD - 1] = '\n';
}

static void test_all(const char *dir) {
    char img[4096], ext[4096], jimg[4096], nvm_img[4096], nvm[4096], ml[4096];
    snprintf(img, sizeof img, "%s/all.img", dir);
    snprintf(ext, sizeof ext, "%s/ext.img", dir);
    snprintf(jimg, sizeof jimg, "%s/ext.journal", dir);
    snprintf(nvm_img, sizeof nvm_img, "%s/nvm.img", dir);
    snprintf(nvm, sizeof nvm, "%s/nvm.region", dir);
    snprintf(ml, sizeof ml, "%s/manylogs.img", dir);

    CHECK(strncmp(okeanos_version(), "okeanos ", 8) == 0);

    /* mkfs, with its mistakes */
    CHECK(okeanos_mkfs(img, 64 << 20, "journal_size=8M") == 0);
    FAILS(okeanos_mkfs(img, 64 << 20, NULL), EINVAL); /* exists */
    CHECK(strstr(okeanos_errmsg(), "exists") != NULL);
    FAILS(okeanos_mkfs(NULL, 64 << 20, NULL), EINVAL);
    char bad_opts[4096];
    snprintf(bad_opts, sizeof bad_opts, "%s/x.img", dir);
    FAILS(okeanos_mkfs(bad_opts, 64 << 20, "journal=floppy"), EINVAL);
    CHECK(strstr(okeanos_errmsg(), "floppy") != NULL);
    CHECK(access(bad_opts, F_OK) != 0); /* nothing left behind */

    /* open: bad options, a missing image, then the real one; a second open is refused */
    CHECK(okeanos_open(img, "data=sometimes") == NULL);
    CHECK(strstr(okeanos_errmsg(), "data") != NULL);
    CHECK(okeanos_open("/nonexistent/okeanos.img", NULL) == NULL);
    okeanos_fs *fs = okeanos_open(img, "data=wasteless+dmeta,commit=5");
    CHECK(fs != NULL);
    if (!fs) return;
    CHECK(okeanos_open(img, NULL) == NULL);
    CHECK(okeanos_errno() == EBUSY);
    CHECK(strstr(okeanos_errmsg(), "use") != NULL || strstr(okeanos_errmsg(), "lock") != NULL);

    /* files */
    CHECK(okeanos_mkdir(fs, "/logs", 0750) == 0);
    FAILS(okeanos_mkdir(fs, "/logs", 0750), EEXIST);
    okeanos_file *f = okeanos_create(fs, "/logs/a.log");
    CHECK(f != NULL);
    char rec[RECORD];
    make_record(rec, 0, 0);
    CHECK(okeanos_append(f, rec, RECORD) == RECORD);
    CHECK(okeanos_durable_len(f) == 0);
    CHECK(okeanos_fdatasync(f) == 0);
    CHECK(okeanos_durable_len(f) == RECORD);
    CHECK(okeanos_wait_durable(f, RECORD, 10) == RECORD);
    make_record(rec, 0, 1);
    CHECK(okeanos_append(f, rec, RECORD) == RECORD);
    CHECK(okeanos_wait_durable(f, 2 * RECORD, 20) == RECORD); /* commit=5: times out */
    CHECK(okeanos_fsync(f) == 0);
    FAILS(okeanos_pwrite(f, "x", 1, 0), EBADF); /* created for appending */
    char back[2 * RECORD];
    CHECK(okeanos_pread(f, back, sizeof back, 0) == 2 * RECORD);
    CHECK(memcmp(back + RECORD, rec, RECORD) == 0);
    CHECK(okeanos_pread(f, back, sizeof back, 10 * RECORD) == 0);
    okeanos_stat_t st;
    CHECK(okeanos_fstat(f, &st) == 0 && st.size == 2 * RECORD && S_ISREG(st.mode));
    FAILS(okeanos_fstat(f, NULL), EINVAL);
    FAILS(okeanos_append(f, NULL, 5), EINVAL);
    CHECK(okeanos_append(f, NULL, 0) == 0);

    /* open_file flags */
    okeanos_file *rw = okeanos_open_file(fs, "/logs/b.dat", OKEANOS_O_RDWR | OKEANOS_O_CREAT | OKEANOS_O_EXCL);
    CHECK(rw != NULL);
    CHECK(okeanos_open_file(fs, "/logs/b.dat", OKEANOS_O_RDWR | OKEANOS_O_CREAT | OKEANOS_O_EXCL) == NULL);
    CHECK(okeanos_pwrite(rw, "hello world", 11, 100) == 11);
    CHECK(okeanos_ftruncate(rw, 105) == 0);
    CHECK(okeanos_fstat(rw, &st) == 0 && st.size == 105);
    CHECK(okeanos_pread(rw, back, 10, 100) == 5 && memcmp(back, "hello", 5) == 0);
    okeanos_file *ro = okeanos_open_file(fs, "/logs/b.dat", OKEANOS_O_RDONLY);
    CHECK(ro != NULL);
    FAILS(okeanos_append(ro, "x", 1), EBADF);
    FAILS(okeanos_ftruncate(ro, 0), EBADF);
    okeanos_file *wo = okeanos_open_file(fs, "/logs/b.dat", OKEANOS_O_WRONLY);
    FAILS(okeanos_pread(wo, back, 1, 0), EBADF);
    CHECK(okeanos_open_file(fs, "/logs/none", OKEANOS_O_RDONLY) == NULL);
    CHECK(okeanos_errno() == ENOENT);
    CHECK(okeanos_open_file(fs, "/logs", OKEANOS_O_RDONLY) == NULL); /* a directory */
    CHECK(okeanos_open_file(fs, "/logs/b.dat", 3) == NULL);
    CHECK(okeanos_open_file(fs, "/logs/b.dat", OKEANOS_O_RDONLY | 0x40000000) == NULL);
    CHECK(okeanos_open_file(fs, "/logs/b.dat", OKEANOS_O_RDONLY | OKEANOS_O_TRUNC) == NULL);
    okeanos_file *tr = okeanos_open_file(fs, "/logs/b.dat", OKEANOS_O_WRONLY | OKEANOS_O_TRUNC);
    CHECK(tr != NULL && okeanos_fstat(tr, &st) == 0 && st.size == 0);
    CHECK(okeanos_close(tr) == 0 && okeanos_close(wo) == 0 && okeanos_close(ro) == 0);

    /* group sync */
    okeanos_file *many[3] = {f, rw, NULL};
    CHECK(okeanos_sync_files(fs, many, 2) == 0);
    FAILS(okeanos_sync_files(fs, many, 3), EINVAL); /* a NULL among them */
    FAILS(okeanos_sync_files(fs, NULL, 2), EINVAL);
    CHECK(okeanos_sync_files(fs, NULL, 0) == 0);

    /* namespace */
    CHECK(okeanos_rename(fs, "/logs/b.dat", "/logs/c.dat") == 0);
    FAILS(okeanos_stat(fs, "/logs/b.dat", &st), ENOENT);
    CHECK(okeanos_stat(fs, "/logs", &st) == 0 && S_ISDIR(st.mode) && (st.mode & 07777) == 0750);
    CHECK(okeanos_truncate(fs, "/logs/c.dat", 7) == 0);
    CHECK(okeanos_stat(fs, "/logs/c.dat", &st) == 0 && st.size == 7);
    okeanos_dir *d = okeanos_opendir(fs, "/logs");
    CHECK(d != NULL);
    okeanos_dirent_t ent;
    int names = 0, r;
    while ((r = okeanos_readdir(d, &ent)) == 1) {
        CHECK(strcmp(ent.name, "a.log") == 0 || strcmp(ent.name, "c.dat") == 0 || ent.name[0] == '.');
        if (ent.name[0] != '.') names++;
    }
    CHECK(r == 0 && names == 2);
    CHECK(okeanos_closedir(d) == 0);
    FAILS(okeanos_readdir(d, &ent), EBADF);
    CHECK(okeanos_opendir(fs, "/logs/a.log") == NULL);
    FAILS(okeanos_rmdir(fs, "/logs"), ENOTEMPTY);
    CHECK(okeanos_close(rw) == 0);
    CHECK(okeanos_unlink(fs, "/logs/c.dat") == 0);
    FAILS(okeanos_unlink(fs, "/logs/c.dat"), ENOENT);
    CHECK(okeanos_mkdir(fs, "/empty", 0755) == 0 && okeanos_rmdir(fs, "/empty") == 0);
    const char bad_utf8[] = {'/', (char)0xff, (char)0xfe, 0};
    FAILS(okeanos_mkdir(fs, bad_utf8, 0755), EINVAL);
    CHECK(strstr(okeanos_errmsg(), "UTF-8") != NULL);
    FAILS(okeanos_mkdir(fs, "relative", 0755), EINVAL);

    /* counters */
    char small[8];
    long long need = okeanos_counters_json(fs, small, sizeof small);
    CHECK(need > 8 && small[7] == 0);
    /* Room to spare: the counters may move (a background commit) between the two calls. */
    char *json = malloc((size_t)need + 256);
    long long got = okeanos_counters_json(fs, json, (size_t)need + 256);
    CHECK(got > 8 && got < need + 256 && json[got] == 0);
    CHECK(strstr(json, "\"commits\"") != NULL && strstr(json, "\"journal_bytes\"") != NULL);
    free(json);
    CHECK(okeanos_sync(fs) == 0);

    /* bad handles: NULL, closed, made up, of the wrong kind */
    FAILS(okeanos_append(NULL, rec, 1), EINVAL);
    FAILS(okeanos_fdatasync(rw), EBADF); /* closed above */
    CHECK(strstr(okeanos_errmsg(), "not an open") != NULL);
    FAILS(okeanos_close(rw), EBADF); /* closed twice */
    FAILS(okeanos_fsync((okeanos_file *)(uintptr_t)0xdeadbeef0ULL), EBADF);
    FAILS(okeanos_fsync((okeanos_file *)fs), EBADF);
    FAILS(okeanos_sync((okeanos_fs *)f), EBADF);

    /* unmount with a file still open: the file answers EBADF, the data is kept */
    CHECK(okeanos_unmount(fs) == 0);
    FAILS(okeanos_append(f, rec, RECORD), EBADF);
    FAILS(okeanos_close(f), EBADF);
    FAILS(okeanos_unmount(fs), EBADF);
    FAILS(okeanos_sync(fs), EBADF);
    fs = okeanos_open(img, "data=data");
    CHECK(fs != NULL);
    f = okeanos_open_file(fs, "/logs/a.log", OKEANOS_O_RDONLY);
    CHECK(okeanos_pread(f, back, sizeof back, 0) == 2 * RECORD && memcmp(back + RECORD, rec, RECORD) == 0);
    CHECK(okeanos_unmount(fs) == 0);

    /* every journal kind through mkfs and open (remote ones need a server: tested in Rust) */
    char opts[8192];
    snprintf(opts, sizeof opts, "journal=external,journal_path=%s,journal_size=4M", jimg);
    CHECK(okeanos_mkfs(ext, 64 << 20, opts) == 0);
    snprintf(opts, sizeof opts, "data=data,journal_path=%s", jimg);
    fs = okeanos_open(ext, opts);
    CHECK(fs != NULL);
    f = okeanos_create(fs, "/x");
    CHECK(okeanos_append(f, rec, RECORD) == RECORD && okeanos_fdatasync(f) == 0);
    CHECK(okeanos_unmount(fs) == 0);
    snprintf(opts, sizeof opts, "nvm=%s,nvm_size=32M", nvm);
    CHECK(okeanos_mkfs(nvm_img, 64 << 20, opts) == 0);
    fs = okeanos_open(nvm_img, "data=data");
    CHECK(fs != NULL);
    f = okeanos_create(fs, "/x");
    CHECK(okeanos_append(f, rec, RECORD) == RECORD && okeanos_fdatasync(f) == 0);
    CHECK(okeanos_unmount(fs) == 0);
    CHECK(okeanos_mkfs(ml, 256 << 20, "journal=manylogs,group_size=32M") == 0);
    fs = okeanos_open(ml, "data=selective");
    CHECK(fs != NULL);
    f = okeanos_create(fs, "/x");
    CHECK(okeanos_append(f, rec, RECORD) == RECORD && okeanos_fdatasync(f) == 0);
    CHECK(okeanos_unmount(fs) == 0);
}

struct appender {
    okeanos_fs *fs;
    int t;
    int ack;
    long done;
};

static volatile int stop_now = 0;

static pthread_mutex_t out_lock = PTHREAD_MUTEX_INITIALIZER;

static void *append_loop(void *arg) {
    struct appender *a = arg;
    char path[64], rec[RECORD];
    snprintf(path, sizeof path, "/t%d.log", a->t);
    okeanos_file *f = okeanos_create(a->fs, path);
    if (!f) {
        fprintf(stderr, "create %s: %s\n", path, okeanos_errmsg());
        exit(2);
    }
    for (long k = 0; !stop_now; k++) {
        make_record(rec, a->t, k);
        if (okeanos_append(f, rec, RECORD) != RECORD || okeanos_fdatasync(f) != 0) {
            fprintf(stderr, "thread %d record %ld: %s\n", a->t, k, okeanos_errmsg());
            exit(2);
        }
        if (a->ack) {
            pthread_mutex_lock(&out_lock);
            printf("ack %d %ld\n", a->t, k);
            fflush(stdout);
            pthread_mutex_unlock(&out_lock);
        }
        a->done = k + 1;
    }
    okeanos_close(f);
    return NULL;
}

/* Runs n appenders; forever if seconds <= 0, otherwise for that long. Returns the records. */
static long run_appenders(const char *img, const char *opts, int n, double seconds, int ack, double *secs) {
    okeanos_fs *fs = okeanos_open(img, opts);
    if (!fs) {
        fprintf(stderr, "open %s: %s\n", img, okeanos_errmsg());
        return -1;
    }
    pthread_t *th = calloc((size_t)n, sizeof *th);
    struct appender *as = calloc((size_t)n, sizeof *as);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < n; i++) {
        as[i] = (struct appender){fs, i, ack, 0};
        pthread_create(&th[i], NULL, append_loop, &as[i]);
    }
    if (seconds > 0) {
        struct timespec d = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
        nanosleep(&d, NULL);
        stop_now = 1;
    }
    long total = 0;
    for (int i = 0; i < n; i++) {
        pthread_join(th[i], NULL);
        total += as[i].done;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    *secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    int r = okeanos_unmount(fs);
    free(th);
    free(as);
    return r == 0 ? total : -1;
}

static int verify(const char *img, const char *acks) {
    okeanos_fs *fs = okeanos_open(img, NULL);
    if (!fs) {
        fprintf(stderr, "open %s: %s\n", img, okeanos_errmsg());
        return 2;
    }
    FILE *in = fopen(acks, "r");
    if (!in) {
        perror(acks);
        return 2;
    }
    int t;
    long k, checked = 0;
    char rec[RECORD], back[RECORD], path[64];
    while (fscanf(in, "ack %d %ld\n", &t, &k) == 2) {
        snprintf(path, sizeof path, "/t%d.log", t);
        okeanos_file *f = okeanos_open_file(fs, path, OKEANOS_O_RDONLY);
        make_record(rec, t, k);
        if (!f || okeanos_pread(f, back, RECORD, (uint64_t)k * RECORD) != RECORD || memcmp(back, rec, RECORD) != 0) {
            fprintf(stderr, "acknowledged record %ld of thread %d is missing or wrong (%s)\n", k, t, f ? "bytes differ" : okeanos_errmsg());
            return 1;
        }
        okeanos_close(f);
        checked++;
    }
    fclose(in);
    if (okeanos_unmount(fs) != 0) return 2;
    printf("%ld acknowledged records came back\n", checked);
    return 0;
}

int main(int argc, char **argv) {
    if (argc >= 3 && strcmp(argv[1], "all") == 0) {
        test_all(argv[2]);
        if (failures) {
            fprintf(stderr, "%d checks failed\n", failures);
            return 1;
        }
        printf("all checks passed\n");
        return 0;
    }
    double secs;
    if (argc >= 4 && strcmp(argv[1], "mkfs") == 0) {
        if (okeanos_mkfs(argv[2], strtoull(argv[3], NULL, 10), argc >= 5 ? argv[4] : NULL) != 0) {
            fprintf(stderr, "mkfs %s: %s\n", argv[2], okeanos_errmsg());
            return 2;
        }
        return 0;
    }
    if (argc >= 4 && strcmp(argv[1], "append") == 0) return run_appenders(argv[2], "data=wasteless+dmeta", atoi(argv[3]), 0, 1, &secs) < 0 ? 2 : 0;
    if (argc >= 4 && strcmp(argv[1], "verify") == 0) return verify(argv[2], argv[3]);
    if (argc >= 6 && strcmp(argv[1], "bench") == 0) {
        int n = atoi(argv[4]);
        long total = run_appenders(argv[2], argv[3], n, atof(argv[5]), 0, &secs);
        if (total < 0) return 2;
        printf("{\"target\": \"C ABI\", \"threads\": %d, \"syncs\": %ld, \"seconds\": %.3f, \"syncs_per_sec\": %.1f}\n", n, total, secs, (double)total / secs);
        return 0;
    }
    fprintf(stderr, "usage: test_okeanos all DIR | mkfs IMG BYTES [OPTIONS] | append IMG THREADS | verify IMG ACKS | bench IMG OPTIONS THREADS SECONDS\n");
    return 2;
}
