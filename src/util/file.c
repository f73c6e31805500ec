/* util/file.c */
#include "util/file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"

kiln_status kiln_file_read(const char *path, size_t max_size, void **data, size_t *size,
                           kiln_error *err)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return kiln_errorf(err, KILN_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    unsigned char *buf = malloc(cap + 1);
    if (!buf) {
        fclose(f);
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
    }
    for (;;) {
        if (n == cap) {
            if (cap > max_size) {
                free(buf);
                fclose(f);
                return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                                   "%s: file larger than the %zu-byte limit", path, max_size);
            }
            size_t ncap = cap * 2;
            unsigned char *nb = realloc(buf, ncap + 1);
            if (!nb) {
                free(buf);
                fclose(f);
                return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
            }
            buf = nb;
            cap = ncap;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0)
            break;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        free(buf);
        return kiln_errorf(err, KILN_ERR_IO, "%s: read error", path);
    }
    if (n > max_size) {
        free(buf);
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                           "%s: file larger than the %zu-byte limit", path, max_size);
    }
    buf[n] = 0;
    *data = buf;
    *size = n;
    return KILN_OK;
}

kiln_status kiln_file_write(const char *path, const void *data, size_t size, kiln_error *err)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return kiln_errorf(err, KILN_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
    size_t put = fwrite(data, 1, size, f);
    int rc = fclose(f);
    if (put != size || rc != 0)
        return kiln_errorf(err, KILN_ERR_IO, "%s: write failed", path);
    return KILN_OK;
}
