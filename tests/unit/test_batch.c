/* Unit tests of core/batch's de-duplication: every record of a batch ends in
 * exactly one place — stored, merged into a stored observation, or
 * dead-lettered with a reason — even when the database refuses the
 * observation that won its key. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "shipped_schema.h"
#include "core/batch.h"

#define REVIEW(thumbs, synced)                                                                     \
    "{\"package_name\":\"com.example.a\",\"review_id\":\"r1\",\"score\":4,\"thumbs_up_count\":" #thumbs \
    ",\"reviewed_at\":\"2026-11-01T00:00:00Z\",\"last_synced_at\":\"2026-11-29T" synced ":00:00Z\"}"

static const char *observations[] = {REVIEW(1, "10"), REVIEW(3, "12"), REVIEW(2, "11"), REVIEW(0, "09")};

static void decode_observations(batch_t *b, record_t *r)
{
    for (size_t i = 0; i < 4; i++)
        r[i] = (record_t){.topic = "reviews", .offset = (int64_t)i, .value = observations[i],
                          .value_len = strlen(observations[i])};
    batch_init(b, pipeline_get(PIPELINE_REVIEWS));
    batch_decode(b, r, 4);
    for (size_t i = 0; i < 4; i++) b->entries[i].application_id = 1;
}

static void refused_winners_hand_their_key_to_the_next_newest_observation_in_turn(void **state)
{
    (void)state;
    batch_t b;
    record_t r[4];
    size_t promoted;
    decode_observations(&b, r);
    assert_int_equal(3, batch_deduplicate(&b));
    assert_int_equal(ENTRY_EVENT, b.entries[1].state); /* 12:00 wins */

    /* The database refuses 12:00: 11:00 takes its place, then 10:00, then
     * 09:00; then none is left. */
    const size_t order[] = {1, 2, 0, 3};
    for (size_t k = 0; k < 4; k++) {
        batch_reject(&b, order[k], "database_rejected", "refused");
        if (k == 3) {
            assert_false(batch_promote(&b, order[k], &promoted));
            break;
        }
        assert_true(batch_promote(&b, order[k], &promoted));
        assert_int_equal(order[k + 1], promoted);
        assert_int_equal(ENTRY_EVENT, b.entries[promoted].state);
        assert_int_equal(2 - k, batch_superseded(&b));
    }
    for (size_t i = 0; i < 4; i++) assert_int_equal(ENTRY_REJECTED, b.entries[i].state);
    batch_free(&b);
}

static void a_stored_winner_keeps_the_observations_it_superseded_merged(void **state)
{
    (void)state;
    batch_t b;
    record_t r[4];
    size_t promoted;
    decode_observations(&b, r);
    batch_deduplicate(&b);
    /* 12:00 refused: 11:00 takes its place, and 10:00 and 09:00 are merged
     * into it now. */
    batch_reject(&b, 1, "database_rejected", "refused");
    assert_true(batch_promote(&b, 1, &promoted));
    assert_int_equal(2, promoted);
    assert_int_equal(2, b.entries[0].winner);
    assert_int_equal(2, b.entries[3].winner);
    assert_int_equal(2, batch_superseded(&b));
    batch_free(&b);
}

/* What a batch's positions and its log line are built from: each partition
 * once, in the order it first appears, with its lowest and highest offset. */
static void a_batch_spans_each_partition_from_its_lowest_to_its_highest_offset(void **state)
{
    (void)state;
    static const struct {
        int32_t partition;
        int64_t offset;
    } coords[] = {{2, 8}, {0, 5}, {2, 9}, {0, 3}, {0, 7}, {1, 40}};
    record_t r[6];
    batch_t b;
    batch_range_t ranges[6];
    for (size_t i = 0; i < 6; i++)
        r[i] = (record_t){.topic = "reviews", .partition = coords[i].partition, .offset = coords[i].offset,
                          .value = observations[0], .value_len = strlen(observations[0])};
    batch_init(&b, pipeline_get(PIPELINE_REVIEWS));
    batch_decode(&b, r, 6);
    assert_int_equal(batch_ranges(&b, ranges), 3);
    assert_int_equal(ranges[0].partition, 2);
    assert_int_equal(ranges[0].first, 8);
    assert_int_equal(ranges[0].last, 9);
    assert_int_equal(ranges[1].partition, 0);
    assert_int_equal(ranges[1].first, 3);
    assert_int_equal(ranges[1].last, 7);
    assert_int_equal(ranges[2].partition, 1);
    assert_int_equal(ranges[2].first, 40);
    assert_int_equal(ranges[2].last, 40);
    batch_free(&b);
}

/* A pipeline of many topics: partition 0 of two topics is two ranges. */
static void ranges_keep_the_partitions_of_two_topics_apart(void **state)
{
    (void)state;
    static const char *const topics[] = {"reviews-eu", "reviews-us", "reviews-eu", "reviews-us"};
    static const int64_t offsets[] = {5, 9, 6, 10};
    record_t r[4];
    batch_t b;
    batch_range_t ranges[4];
    for (size_t i = 0; i < 4; i++)
        r[i] = (record_t){.topic = topics[i], .partition = 0, .offset = offsets[i],
                          .value = observations[0], .value_len = strlen(observations[0])};
    batch_init(&b, pipeline_get(PIPELINE_REVIEWS));
    batch_decode(&b, r, 4);
    assert_int_equal(batch_ranges(&b, ranges), 2);
    assert_string_equal(ranges[0].topic, "reviews-eu");
    assert_int_equal(ranges[0].first, 5);
    assert_int_equal(ranges[0].last, 6);
    assert_string_equal(ranges[1].topic, "reviews-us");
    assert_int_equal(ranges[1].first, 9);
    assert_int_equal(ranges[1].last, 10);
    batch_free(&b);
}

/* Production keys share long prefixes (Google Play review ids all start
 * "gp:AOqpTO", package names "com.<vendor>."): every key is still told
 * apart, every repeat found, and app_stats' key includes the app. */
static void keys_sharing_a_long_prefix_are_told_apart_and_repeats_found(void **state)
{
    (void)state;
    enum { DISTINCT = 1000, N = 2 * DISTINCT };
    static char text[N][256];
    static record_t r[N];
    const char *names[N];
    uint32_t name_of[N];
    batch_t b;
    for (size_t i = 0; i < N; i++) {
        size_t k = i % DISTINCT; /* the second half repeats the first */
        snprintf(text[i], sizeof text[i],
                 "{\"package_name\":\"com.example.product%04zu\",\"review_id\":\"gp:AOqpTOEabcdefgh%04zu\","
                 "\"score\":4,\"thumbs_up_count\":0,\"reviewed_at\":\"2026-11-01T00:00:00Z\",\"last_synced_at\":\"2026-11-29T10:00:%02zuZ\"}",
                 k, k, i / DISTINCT);
        r[i] = (record_t){.topic = "reviews", .offset = (int64_t)i, .value = text[i], .value_len = strlen(text[i])};
    }
    batch_init(&b, pipeline_get(PIPELINE_REVIEWS));
    batch_decode(&b, r, N);
    for (size_t i = 0; i < N; i++) b.entries[i].application_id = (int64_t)(i % DISTINCT);
    assert_int_equal(DISTINCT, batch_package_names(&b, names, name_of));
    for (size_t i = 0; i < N; i++) /* each event points at its own name, found once */
        assert_int_equal(i % DISTINCT, name_of[i]);
    assert_int_equal(DISTINCT, batch_deduplicate(&b));
    for (size_t i = 0; i < N; i++) /* the later observation (second :01) wins */
        assert_int_equal(i < DISTINCT ? ENTRY_SUPERSEDED : ENTRY_EVENT, b.entries[i].state);
    batch_free(&b);

    /* app_stats: the same crawled_at under different apps is not a repeat. */
    for (size_t i = 0; i < N; i++) {
        snprintf(text[i], sizeof text[i],
                 "{\"package_name\":\"com.example.product%04zu\",\"crawled_at\":\"2026-11-29T10:00:00Z\"}",
                 i % DISTINCT);
        r[i] = (record_t){.topic = "app-stats", .offset = (int64_t)i, .value = text[i], .value_len = strlen(text[i])};
    }
    batch_init(&b, pipeline_get(PIPELINE_APP_STATS));
    batch_decode(&b, r, N);
    for (size_t i = 0; i < N; i++) {
        assert_int_equal(ENTRY_EVENT, b.entries[i].state);
        b.entries[i].application_id = (int64_t)(i % DISTINCT);
    }
    assert_int_equal(DISTINCT, batch_deduplicate(&b));
    for (size_t i = 0; i < N; i++) b.entries[i].state = ENTRY_EVENT, b.entries[i].application_id = (int64_t)i;
    assert_int_equal(0, batch_deduplicate(&b));
    batch_free(&b);
}

/* The order a batch is COPYed in: reviews by review_id alone, byte by byte;
 * app_stats by the application's id first, then crawled_at. */
static void a_batch_is_ordered_by_its_natural_key_the_application_first_when_the_key_has_it(void **state)
{
    (void)state;
    static const char *reviews[] = {
        "{\"package_name\":\"com.example.a\",\"review_id\":\"gp:b\",\"score\":4,\"thumbs_up_count\":0,\"reviewed_at\":\"2026-11-01T00:00:00Z\",\"last_synced_at\":\"2026-11-29T10:00:00Z\"}",
        "{\"package_name\":\"com.example.z\",\"review_id\":\"gp:B\",\"score\":4,\"thumbs_up_count\":0,\"reviewed_at\":\"2026-11-01T00:00:00Z\",\"last_synced_at\":\"2026-11-29T10:00:00Z\"}",
        "{\"package_name\":\"com.example.a\",\"review_id\":\"gp:a\",\"score\":4,\"thumbs_up_count\":0,\"reviewed_at\":\"2026-11-01T00:00:00Z\",\"last_synced_at\":\"2026-11-29T10:00:00Z\"}"};
    static const char *stats[] = {"{\"package_name\":\"com.example.a\",\"crawled_at\":\"2026-11-29T09:00:00Z\"}",
                                  "{\"package_name\":\"com.example.b\",\"crawled_at\":\"2026-11-29T08:00:00Z\"}",
                                  "{\"package_name\":\"com.example.a\",\"crawled_at\":\"2026-11-29T07:00:00Z\"}"};
    record_t r[3];
    batch_t b;
    size_t idx[3] = {0, 1, 2};
    for (size_t i = 0; i < 3; i++)
        r[i] = (record_t){.topic = "reviews", .offset = (int64_t)i, .value = reviews[i], .value_len = strlen(reviews[i])};
    batch_init(&b, pipeline_get(PIPELINE_REVIEWS));
    batch_decode(&b, r, 3);
    const int64_t review_apps[] = {1, 9, 1};
    for (size_t i = 0; i < 3; i++) b.entries[i].application_id = review_apps[i];
    batch_sort_by_key(&b, idx, 3);
    assert_int_equal(1, idx[0]); /* gp:B < gp:a < gp:b, whatever the apps */
    assert_int_equal(2, idx[1]);
    assert_int_equal(0, idx[2]);
    batch_free(&b);

    for (size_t i = 0; i < 3; i++)
        r[i] = (record_t){.topic = "app-stats", .offset = (int64_t)i, .value = stats[i], .value_len = strlen(stats[i])};
    batch_init(&b, pipeline_get(PIPELINE_APP_STATS));
    batch_decode(&b, r, 3);
    const int64_t stat_apps[] = {2, 1, 2};
    for (size_t i = 0; i < 3; i++) b.entries[i].application_id = stat_apps[i], idx[i] = i;
    batch_sort_by_key(&b, idx, 3);
    assert_int_equal(1, idx[0]); /* app 1, then app 2's 07:00 and 09:00 */
    assert_int_equal(2, idx[1]);
    assert_int_equal(0, idx[2]);
    batch_free(&b);

    /* Keys alike in their first eight bytes and beyond are ordered by the
     * rest, and a key that is a prefix of another comes first. */
    static const char *long_keys[] = {"review-000000002", "review-000000001", "review-00000000"};
    char values[3][256];
    for (size_t i = 0; i < 3; i++) {
        snprintf(values[i], sizeof values[i],
                 "{\"package_name\":\"com.example.a\",\"review_id\":\"%s\",\"score\":4,\"thumbs_up_count\":0,"
                 "\"reviewed_at\":\"2026-11-01T00:00:00Z\",\"last_synced_at\":\"2026-11-29T10:00:00Z\"}",
                 long_keys[i]);
        r[i] = (record_t){.topic = "reviews", .offset = (int64_t)i, .value = values[i], .value_len = strlen(values[i])};
    }
    batch_init(&b, pipeline_get(PIPELINE_REVIEWS));
    batch_decode(&b, r, 3);
    for (size_t i = 0; i < 3; i++) b.entries[i].application_id = 1, idx[i] = i;
    batch_sort_by_key(&b, idx, 3);
    assert_int_equal(2, idx[0]);
    assert_int_equal(1, idx[1]);
    assert_int_equal(0, idx[2]);
    batch_free(&b);
}

int main(void)
{
    shipped_schema_bind();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(refused_winners_hand_their_key_to_the_next_newest_observation_in_turn),
        cmocka_unit_test(a_stored_winner_keeps_the_observations_it_superseded_merged),
        cmocka_unit_test(a_batch_spans_each_partition_from_its_lowest_to_its_highest_offset),
        cmocka_unit_test(ranges_keep_the_partitions_of_two_topics_apart),
        cmocka_unit_test(keys_sharing_a_long_prefix_are_told_apart_and_repeats_found),
        cmocka_unit_test(a_batch_is_ordered_by_its_natural_key_the_application_first_when_the_key_has_it),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
