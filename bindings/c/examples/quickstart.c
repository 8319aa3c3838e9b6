/* The C quick start of docs/EMBEDDING.md and the README (built and run by
 * crates/okeanos-ffi/tests/c_abi.rs):
 *
 *   cargo build --release -p okeanos-ffi
 *   cc -I bindings/c quickstart.c -L target/release -lokeanos -Wl,-rpath,target/release -o quickstart
 *   ./quickstart /tmp
 */
#include "okeanos.h"

#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
    char image[4096];
    snprintf(image, sizeof image, "%s/ingest.img", argc > 1 ? argv[1] : ".");

    /* An image file of 256 MiB with an internal journal (the default options). */
    if (okeanos_mkfs(image, 256u << 20, NULL) != 0) {
        fprintf(stderr, "mkfs: %s\n", okeanos_errmsg());
        return 1;
    }
    okeanos_fs *fs = okeanos_open(image, "data=wasteless+dmeta");
    if (!fs) {
        fprintf(stderr, "open: %s\n", okeanos_errmsg());
        return 1;
    }

    /* Per-tenant logs: append a record, make it durable (threads may share one okeanos_fs). */
    okeanos_file *logs[4];
    for (int i = 0; i < 4; i++) {
        char path[64], rec[64];
        snprintf(path, sizeof path, "/tenant-%d.log", i);
        logs[i] = okeanos_create(fs, path);
        int n = snprintf(rec, sizeof rec, "tenant=%d temp=21.5\n", i);
        if (!logs[i] || okeanos_append(logs[i], rec, (size_t)n) != n || okeanos_fdatasync(logs[i]) != 0) {
            fprintf(stderr, "%s: %s\n", path, okeanos_errmsg());
            return 1;
        }
    }

    /* Group sync: one more record in each, all made durable by one commit. */
    for (int i = 0; i < 4; i++) okeanos_append(logs[i], "checkpoint\n", 11);
    if (okeanos_sync_files(fs, logs, 4) != 0) {
        fprintf(stderr, "sync_files: %s\n", okeanos_errmsg());
        return 1;
    }

    /* A tailing reader reads only below the durable watermark. */
    int64_t durable = okeanos_durable_len(logs[0]);
    char buf[256] = {0};
    int64_t got = okeanos_pread(logs[0], buf, (size_t)durable < sizeof buf - 1 ? (size_t)durable : sizeof buf - 1, 0);
    printf("%lld durable bytes of /tenant-0.log: %s", (long long)durable, got > 0 ? buf : "\n");

    for (int i = 0; i < 4; i++) okeanos_close(logs[i]);
    if (okeanos_unmount(fs) != 0) {
        fprintf(stderr, "unmount: %s\n", okeanos_errmsg());
        return 1;
    }
    return 0;
}
