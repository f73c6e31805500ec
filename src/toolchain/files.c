/* toolchain/files.c: the small file-system helpers of the toolchain:
 * directories, text files, copies, the cache location, the embedded headers. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lower/hash.h"
#include "toolchain/toolchain.h"
#include "util/error.h"

kiln_status kiln_mkdirs(const char *path, kiln_error *err)
{
    char buf[4096];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "path too long: %s", path);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = 0;
        if (mkdir(buf, 0755) != 0 && errno != EEXIST)
            return kiln_errorf(err, KILN_ERR_IO, "cannot create directory '%s': %s", buf,
                               strerror(errno));
        *p = '/';
    }
    if (mkdir(buf, 0755) != 0 && errno != EEXIST)
        return kiln_errorf(err, KILN_ERR_IO, "cannot create directory '%s': %s", buf,
                           strerror(errno));
    return KILN_OK;
}

void kiln_rmtree(const char *path)
{
    DIR *d = opendir(path);
    if (!d) {
        unlink(path);
        return;
    }
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        char sub[4096];
        snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
        struct stat st;
        if (lstat(sub, &st) == 0 && S_ISDIR(st.st_mode))
            kiln_rmtree(sub);
        else
            unlink(sub);
    }
    closedir(d);
    rmdir(path);
}

kiln_status kiln_write_text(const char *path, const char *text, kiln_error *err)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return kiln_errorf(err, KILN_ERR_IO, "cannot create '%s': %s", path, strerror(errno));
    size_t n = strlen(text);
    bool ok = fwrite(text, 1, n, f) == n;
    if (fclose(f) != 0 || !ok)
        return kiln_errorf(err, KILN_ERR_IO, "writing '%s' failed (disk full?)", path);
    return KILN_OK;
}

kiln_status kiln_copy_file(const char *from, const char *to, kiln_error *err)
{
    FILE *in = fopen(from, "rb");
    if (!in)
        return kiln_errorf(err, KILN_ERR_IO, "cannot open '%s': %s", from, strerror(errno));
    FILE *out = fopen(to, "wb");
    if (!out) {
        fclose(in);
        return kiln_errorf(err, KILN_ERR_IO, "cannot create '%s': %s", to, strerror(errno));
    }
    char buf[1 << 16];
    size_t n;
    bool ok = true;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0)
        if (fwrite(buf, 1, n, out) != n) {
            ok = false;
            break;
        }
    fclose(in);
    if (fclose(out) != 0 || !ok)
        return kiln_errorf(err, KILN_ERR_IO, "writing '%s' failed (disk full?)", to);
    return KILN_OK;
}

char *kiln_cache_dir(const char *configured)
{
    char buf[4096];
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (configured && *configured)
        snprintf(buf, sizeof buf, "%s", configured);
    else if (xdg && *xdg)
        snprintf(buf, sizeof buf, "%s/kiln", xdg);
    else
        snprintf(buf, sizeof buf, "%s/.cache/kiln", home && *home ? home : "/tmp");
    return strdup(buf);
}

kiln_status kiln_write_headers(const char *dir, kiln_error *err)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/include/kiln", dir);
    kiln_status s = kiln_mkdirs(path, err);
    for (int i = 0; i < kiln_embedded_header_count && s == KILN_OK; i++) {
        const kiln_embedded_file *f = &kiln_embedded_headers[i];
        snprintf(path, sizeof path, "%s/include/%s", dir, f->name);
        FILE *fp = fopen(path, "wb");
        if (!fp)
            return kiln_errorf(err, KILN_ERR_IO, "cannot create '%s': %s", path, strerror(errno));
        bool ok = fwrite(f->data, 1, f->size, fp) == f->size;
        if (fclose(fp) != 0 || !ok)
            s = kiln_errorf(err, KILN_ERR_IO, "writing '%s' failed (disk full?)", path);
    }
    return s;
}

void kiln_headers_hash(char out[33])
{
    kiln_hash h;
    kiln_hash_init(&h, 3);
    for (int i = 0; i < kiln_embedded_header_count; i++) {
        kiln_hash_str(&h, kiln_embedded_headers[i].name);
        kiln_hash_update(&h, kiln_embedded_headers[i].data, kiln_embedded_headers[i].size);
    }
    kiln_hash_hex(&h, out);
}
