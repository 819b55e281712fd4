/* member — a member of one pipeline's consumer group that reads nothing:
 * it joins the group, holds (paused) the partitions it is given, and
 * commits offsets as a member. The replay's way of moving a group
 * (DESIGN.md: Operations): being given every partition proves no other
 * member is active, and a member's commit works on every cluster. */
#ifndef STORAGE_KAFKA_MEMBER_H
#define STORAGE_KAFKA_MEMBER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kafka/cluster.h"
#include "settings.h"

typedef struct member member_t;

/* A member-to-be of pipeline `id`'s group, not joined yet; its logs are
 * under `log_name`. Returns NULL with the reason in `err`, and
 * *invalid_setting true when a setting is at fault. */
member_t *member_new(const settings_t *s, pipeline_id_t id, const char *log_name,
                     bool *invalid_setting, char *err, size_t errlen);

/* The member's own handle as a read-only cluster client (lookups,
 * watermarks, committed offsets, offsets for a time), valid until
 * member_close. Not for cluster_client_destroy, nor for reading a partition
 * (cluster_read_start): the member's partitions are its group's. */
cluster_client_t *member_cluster(member_t *m);

/* Join the group on `topics` (each must be known to exist: subscribing to
 * a missing topic creates it on a broker with auto-creation on; the list
 * must outlive the member). Returns 0, or -1 with the reason in `err`. */
int member_join(member_t *m, const topic_list_t *topics, char *err, size_t errlen);

/* Serve the membership for up to `ms`: rebalances happen here. */
void member_serve(member_t *m, int ms);

/* Partitions of the topics held now. */
int member_owned(const member_t *m);

/* Assignments received since joining, empty ones included. */
int member_assignments(const member_t *m);

/* Commit offsets[t][p] for partitions 0..n[t]-1 of each topic t of
 * `topics` as this member, in one request, waiting at most `timeout_ms`.
 * Returns 0, or -1 with the reason in `err`. */
int member_commit(member_t *m, const topic_list_t *topics, const int *n, int64_t *const *offsets, int timeout_ms,
                  char *err, size_t errlen);

/* Leave the group if joined (the group's next member is assigned at once)
 * and free everything (NULL is ignored). */
void member_close(member_t *m);

#endif
