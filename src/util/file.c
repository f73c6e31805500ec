/* util/file.c */
#define _DEFAULT_SOURCE 1 /* MAP_POPULATE */
#include "util/file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

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

kiln_status kiln_file_map(const char *path, size_t max_size, kiln_file_bytes *out,
                          kiln_error *err)
{
    *out = (kiln_file_bytes){0};
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return kiln_errorf(err, KILN_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size == 0) {
        close(fd);
        return kiln_file_read(path, max_size, &out->data, &out->size, err);
    }
    if ((uint64_t)st.st_size > max_size) {
        close(fd);
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                           "%s: file larger than the %zu-byte limit", path, max_size);
    }
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
    close(fd);
    if (p == MAP_FAILED) /* no address space or a file system that cannot map */
        return kiln_file_read(path, max_size, &out->data, &out->size, err);
    out->data = p;
    out->size = (size_t)st.st_size;
    out->mapped = true;
    return KILN_OK;
}

void kiln_file_release(kiln_file_bytes *b)
{
    if (b->mapped)
        munmap(b->data, b->size);
    else
        free(b->data);
    *b = (kiln_file_bytes){0};
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
