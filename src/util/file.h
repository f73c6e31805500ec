/* util/file.h: whole-file reads with a size limit. */
#ifndef KILN_UTIL_FILE_H
#define KILN_UTIL_FILE_H

#include <stdbool.h>
#include <stddef.h>

#include "kiln/types.h"

/* Reads `path` into a malloc'ed buffer (NUL-terminated for convenience; *size
 * excludes the NUL). Fails with KILN_ERR_IO naming the path and the reason,
 * or KILN_ERR_INVALID_ARGUMENT if the file is larger than max_size. */
kiln_status kiln_file_read(const char *path, size_t max_size, void **data, size_t *size,
                           kiln_error *err);
/* A file's bytes, mapped or read. */
typedef struct kiln_file_bytes {
    void *data;
    size_t size;
    bool mapped;
} kiln_file_bytes;

/* Maps `path` read-only (a private mapping, populated at once): a model's
 * bytes straight from the page cache, with no copy into fresh memory. A
 * file that cannot be mapped (a pipe, an empty file) is read as by
 * kiln_file_read; the same errors. Release with kiln_file_release. */
kiln_status kiln_file_map(const char *path, size_t max_size, kiln_file_bytes *out,
                          kiln_error *err);
void kiln_file_release(kiln_file_bytes *b);
kiln_status kiln_file_write(const char *path, const void *data, size_t size, kiln_error *err);

#endif
