/* util/packmemo.h: which weights files hold weights packed before.
 *
 * A VM builds one module per input-shape class from one decoded model, and
 * every class packed the same weights the same way again (BERT-base: about
 * 340 MB per class, most of a new class's time in fresh pages and the
 * packing), then hashed them to name their shared file (<hash>.w in the
 * model cache, kiln_build_share_weights). The memo, owned by the VM,
 * remembers for a source range of the model's weights and a key (every
 * parameter of the packing besides those bytes) the file that holds the
 * packed form; the next class maps that file instead (the page cache's
 * pages, nothing packed, nothing hashed).
 *
 * Only sources declared stable are memoized (kiln_pack_memo_add_source:
 * memory that stays alive and unchanged while the memo lives, the VM's
 * decoded initializers), so an address reused by other data can never find
 * an entry. A file that has gone (the cache bound pruned it) is a miss: the
 * weights are packed again and the entry replaced.
 *
 * The disk tier (kiln_pack_memo_set_dir: the model cache's folder) outlives
 * the process: a new process that builds a model again, or one of its shape
 * classes, finds the file there too. Its entries are keyed by content, not
 * address (the caller's content key: the source bytes, the packing's key and
 * kiln's code identity, lower/hash.h), so any source may use it, stable or
 * not. Each is a small file <dir>/<content key>.pm naming the weights file
 * beside it; a missing, unreadable or malformed one, or one whose weights
 * file has gone, is a miss. Thread-safe. */
#ifndef KILN_UTIL_PACKMEMO_H
#define KILN_UTIL_PACKMEMO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct kiln_pack_memo kiln_pack_memo;

/* NULL when out of memory. */
kiln_pack_memo *kiln_pack_memo_create(void);
void kiln_pack_memo_destroy(kiln_pack_memo *m);
/* Declares [p, p + n) stable for the memo's life; false when out of memory. */
bool kiln_pack_memo_add_source(kiln_pack_memo *m, const void *p, size_t n);
/* Whether [p, p + n) lies inside one stable range. */
bool kiln_pack_memo_stable(const kiln_pack_memo *m, const void *p, size_t n);
/* The file recorded for source [src, src + n) and `key`, written into path
 * (cap bytes), with its size; false when none (or the source is not
 * stable). */
bool kiln_pack_memo_find(kiln_pack_memo *m, const void *src, size_t n, const char *key,
                         char *path, size_t cap, int64_t *nbytes);
/* Records (or replaces) the file of source [src, src + n) for `key`;
 * ignored for a source that is not stable; false when out of memory. */
bool kiln_pack_memo_put(kiln_pack_memo *m, const void *src, size_t n, const char *key,
                        const char *path, int64_t nbytes);
/* The disk tier's folder (copied); false when out of memory. */
bool kiln_pack_memo_set_dir(kiln_pack_memo *m, const char *dir);
bool kiln_pack_memo_has_dir(const kiln_pack_memo *m);
/* The weights file <dir>/<content key>.pm names, as for kiln_pack_memo_find
 * (the .pm file is marked used); false when none or not valid. */
bool kiln_pack_memo_find_disk(kiln_pack_memo *m, const char *ckey, char *path, size_t cap,
                              int64_t *nbytes);
/* Records the weights file `path` (in the folder) for a content key: the .pm
 * written beside, then renamed; false when it could not be written (the
 * memo then just misses next time). */
bool kiln_pack_memo_put_disk(kiln_pack_memo *m, const char *ckey, const char *path,
                             int64_t nbytes);
/* Entries recorded (tests). */
int kiln_pack_memo_count(const kiln_pack_memo *m);

#endif
