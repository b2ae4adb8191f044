/* journal.h: the embedded store's write-ahead journal. A raise is durable
 * once its record is in the journal: one write and one fdatasync for a
 * group of raises, where an LMDB commit needs two ordered flushes. LMDB
 * stays the index; each of its commits (a checkpoint) retires the
 * journal, which then starts over under the next epoch. */
#ifndef TM_JOURNAL_H
#define TM_JOURNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The file's size: zero-filled when created, so that writing a record
 * only overwrites blocks the file already has and fdatasync has no
 * metadata to flush. */
#define JOURNAL_SIZE ((size_t)4 << 20)
/* The longest key an entry may carry. */
#define JOURNAL_KEY_MAX 1024

struct journal;

/* Called by journal_replay for each entry, in the order written. A
 * nonzero result stops the replay and is returned by it. */
typedef int (*journal_fn)(void *arg, const unsigned char *key, size_t len,
                          int64_t token);

/* Open or create the journal at path, at least JOURNAL_SIZE bytes, and
 * lock it so that no other process writes it. NULL on failure, with the
 * reason in err. */
struct journal *journal_open(const char *path, char *err, size_t errlen);
void journal_close(struct journal *j);

/* Feed every entry of epoch's records to fn, from the start of the file,
 * stopping at the first record that is torn, of another epoch, or no
 * record at all. *entries gets how many were fed. 0, fn's nonzero
 * result, EBADMSG when a record passes its checksum but does not parse, or
 * errno of a failed read. */
int journal_replay(struct journal *j, uint64_t epoch, journal_fn fn, void *arg,
                   size_t *entries) __attribute__((warn_unused_result));

/* Write epoch's records from the start of the file on. What the journal
 * held must be in LMDB by now; entries not yet written are dropped. */
void journal_restart(struct journal *j, uint64_t epoch);

/* Whether an entry with a key of len bytes still fits in the file. */
bool journal_fits(const struct journal *j, size_t len);

/* Add an entry (journal_fits must hold, len <= JOURNAL_KEY_MAX). It is
 * buffered, and written when its record is full or at journal_sync. 0,
 * or errno of a failed write. */
int journal_add(struct journal *j, const void *key, size_t len, int64_t token)
    __attribute__((warn_unused_result));

/* Write the entries added since the last sync and fdatasync the file:
 * they are on stable storage when this returns 0. No-op when nothing was
 * added. errno on failure: the file's contents are then unknown and the
 * caller must not sync again and trust the answer. */
int journal_sync(struct journal *j) __attribute__((warn_unused_result));

/* Forget the entries added and not yet written (a batch that failed). */
void journal_drop(struct journal *j);

/* CRC-32C (Castagnoli) of len bytes, continuing from crc (0 to start). */
uint32_t journal_crc32c(uint32_t crc, const void *buf, size_t len);

#endif
