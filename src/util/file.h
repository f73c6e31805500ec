/* util/file.h: whole-file reads with a size limit. */
#ifndef KILN_UTIL_FILE_H
#define KILN_UTIL_FILE_H

#include <stddef.h>

#include "kiln/types.h"

/* Reads `path` into a malloc'ed buffer (NUL-terminated for convenience; *size
 * excludes the NUL). Fails with KILN_ERR_IO naming the path and the reason,
 * or KILN_ERR_INVALID_ARGUMENT if the file is larger than max_size. */
kiln_status kiln_file_read(const char *path, size_t max_size, void **data, size_t *size,
                           kiln_error *err);
kiln_status kiln_file_write(const char *path, const void *data, size_t size, kiln_error *err);

#endif
