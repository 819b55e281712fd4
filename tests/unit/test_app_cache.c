/* Unit tests of core/app_cache: package_name -> application_id for one batch
 * at a time. A registered app must never become unregistered_app because of
 * the cache: not when it grows, not when a TTL passes mid-batch, not with a
 * TTL of 0. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/app_cache.h"

#define NAMES 100000

static char (*make_names(size_t n))[32]
{
    char(*names)[32] = malloc(n * sizeof *names);
    assert_non_null(names);
    for (size_t i = 0; i < n; i++) snprintf(names[i], sizeof names[i], "com.example.app%zu", i);
    return names;
}

/* Resolve one batch of names[from..to) at `now`, answering every stale name
 * as registered with id = its number + 1. Returns how many were asked. */
static size_t resolve_all(app_cache_t *c, char (*names)[32], size_t from, size_t to, int64_t now)
{
    size_t n = to - from;
    const char **batch = malloc(n * sizeof *batch);
    int64_t *ids = malloc(n * sizeof *ids);
    size_t *stale = malloc(n * sizeof *stale);
    assert_non_null(batch);
    assert_non_null(ids);
    assert_non_null(stale);
    for (size_t i = 0; i < n; i++) batch[i] = names[from + i];
    size_t k = app_cache_begin(c, batch, n, now, ids, stale);
    for (size_t i = 0; i < k; i++) app_cache_answer(c, batch[stale[i]], atoll(batch[stale[i]] + 15) + 1, now);
    /* A fresh name's id comes with the batch's beginning. */
    for (size_t i = 0, j = 0; i < n; i++) {
        if (j < k && stale[j] == i) {
            assert_int_equal(-1, ids[i]);
            j++;
        } else {
            assert_int_equal(atoll(batch[i] + 15) + 1, ids[i]);
        }
    }
    free(batch);
    free(ids);
    free(stale);
    return k;
}

static void every_name_of_a_batch_stays_bound_while_the_cache_grows_to_100000(void **state)
{
    (void)state;
    char(*names)[32] = make_names(NAMES);
    app_cache_t *c = app_cache_new(300000);
    /* Batches of 500 names, each growing the cache past another doubling. */
    for (size_t from = 0; from < NAMES; from += 500) {
        assert_int_equal(500, resolve_all(c, names, from, from + 500, 1000));
        for (size_t i = from; i < from + 500; i++)
            if (app_cache_lookup(c, names[i]) != (int64_t)i + 1)
                fail_msg("%s lost after the cache grew to %zu names", names[i], app_cache_size(c));
    }
    assert_int_equal(NAMES, app_cache_size(c));
    /* Still fresh: a batch of already known names asks nothing. */
    assert_int_equal(0, resolve_all(c, names, 0, NAMES, 2000));
    app_cache_free(c);
    free(names);
}

static void a_name_fresh_when_the_batch_began_stays_bound_after_its_ttl_passes(void **state)
{
    (void)state;
    app_cache_t *c = app_cache_new(1000);
    const char *first[] = {"com.example.cached"};
    int64_t ids[2];
    size_t stale[2];
    assert_int_equal(1, app_cache_begin(c, first, 1, 0, ids, stale));
    app_cache_answer(c, "com.example.cached", 7, 0);

    /* 999 ms later the name is fresh; the query for the other name then
     * takes 5 s. */
    const char *batch[] = {"com.example.cached", "com.example.new"};
    assert_int_equal(1, app_cache_begin(c, batch, 2, 999, ids, stale));
    assert_int_equal(1, stale[0]); /* com.example.new */
    assert_int_equal(7, ids[0]);   /* com.example.cached, fresh */
    assert_int_equal(-1, ids[1]);
    app_cache_answer(c, "com.example.new", 8, 5999);
    assert_int_equal(7, app_cache_lookup(c, "com.example.cached"));
    assert_int_equal(8, app_cache_lookup(c, "com.example.new"));
    app_cache_free(c);
}

static void a_ttl_of_zero_asks_for_every_name_of_every_batch_and_binds_the_answers(void **state)
{
    (void)state;
    app_cache_t *c = app_cache_new(0);
    const char *batch[] = {"com.example.a", "com.example.b"};
    int64_t ids[2];
    size_t stale[2];
    for (int64_t now = 0; now < 3; now++) {
        assert_int_equal(2, app_cache_begin(c, batch, 2, now, ids, stale));
        app_cache_answer(c, "com.example.a", 1, now);
        app_cache_answer(c, "com.example.b", 2, now);
        assert_int_equal(1, app_cache_lookup(c, "com.example.a"));
        assert_int_equal(2, app_cache_lookup(c, "com.example.b"));
    }
    app_cache_free(c);
}

static void a_stale_name_the_registry_no_longer_has_is_unregistered_and_not_cached(void **state)
{
    (void)state;
    app_cache_t *c = app_cache_new(1000);
    const char *batch[] = {"com.example.deleted"};
    int64_t ids[1];
    size_t stale[1];
    assert_int_equal(1, app_cache_begin(c, batch, 1, 0, ids, stale));
    app_cache_answer(c, "com.example.deleted", 3, 0);
    assert_int_equal(3, app_cache_lookup(c, "com.example.deleted"));

    /* Past the TTL the registry is asked again and does not answer it. */
    assert_int_equal(1, app_cache_begin(c, batch, 1, 1000, ids, stale));
    assert_int_equal(-1, app_cache_lookup(c, "com.example.deleted"));
    /* Nor is the absence remembered: the next batch asks again, and the app
     * registered meanwhile (a new id) is bound. */
    assert_int_equal(1, app_cache_begin(c, batch, 1, 1001, ids, stale));
    app_cache_answer(c, "com.example.deleted", 9, 1001);
    assert_int_equal(9, app_cache_lookup(c, "com.example.deleted"));
    app_cache_free(c);
}

static void a_name_not_in_the_current_batch_is_not_bound_even_when_fresh(void **state)
{
    (void)state;
    app_cache_t *c = app_cache_new(300000);
    const char *one[] = {"com.example.one"}, *two[] = {"com.example.two"};
    int64_t ids[1];
    size_t stale[1];
    assert_int_equal(1, app_cache_begin(c, one, 1, 0, ids, stale));
    app_cache_answer(c, "com.example.one", 1, 0);
    assert_int_equal(1, app_cache_begin(c, two, 1, 1, ids, stale));
    assert_int_equal(-1, app_cache_lookup(c, "com.example.one"));
    app_cache_free(c);
}

static void growth_sheds_only_names_that_are_stale_and_outside_the_batch(void **state)
{
    (void)state;
    char(*names)[32] = make_names(10000);
    app_cache_t *c = app_cache_new(1000);
    resolve_all(c, names, 0, 4000, 0); /* stale from 1000 on */
    /* At 5000 the first 4000 are stale; the next 6000 make the table grow. */
    assert_int_equal(6000, resolve_all(c, names, 4000, 10000, 5000));
    for (size_t i = 4000; i < 10000; i++) assert_int_equal((int64_t)i + 1, app_cache_lookup(c, names[i]));
    assert_int_equal(6000, app_cache_size(c));
    app_cache_free(c);
    free(names);
}

static void a_forgotten_name_stays_bound_now_and_is_asked_again_next_batch(void **state)
{
    (void)state;
    app_cache_t *c = app_cache_new(300000);
    const char *batch[] = {"com.example.again"};
    int64_t ids[1];
    size_t stale[1];
    assert_int_equal(1, app_cache_begin(c, batch, 1, 0, ids, stale));
    app_cache_answer(c, "com.example.again", 5, 0);
    app_cache_forget(c, "com.example.again");
    assert_int_equal(5, app_cache_lookup(c, "com.example.again"));
    assert_int_equal(1, app_cache_begin(c, batch, 1, 1, ids, stale));
    app_cache_answer(c, "com.example.again", 6, 1);
    assert_int_equal(6, app_cache_lookup(c, "com.example.again"));
    app_cache_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_name_of_a_batch_stays_bound_while_the_cache_grows_to_100000),
        cmocka_unit_test(a_name_fresh_when_the_batch_began_stays_bound_after_its_ttl_passes),
        cmocka_unit_test(a_ttl_of_zero_asks_for_every_name_of_every_batch_and_binds_the_answers),
        cmocka_unit_test(a_stale_name_the_registry_no_longer_has_is_unregistered_and_not_cached),
        cmocka_unit_test(a_name_not_in_the_current_batch_is_not_bound_even_when_fresh),
        cmocka_unit_test(growth_sheds_only_names_that_are_stale_and_outside_the_batch),
        cmocka_unit_test(a_forgotten_name_stays_bound_now_and_is_asked_again_next_batch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
