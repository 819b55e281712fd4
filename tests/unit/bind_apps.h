/* bind_apps — for unit tests: bind a batch's events as if the registry held
 * one app, `registered` with `id`, and nothing else. */
#ifndef STORAGE_TEST_BIND_APPS_H
#define STORAGE_TEST_BIND_APPS_H

#include <string.h>

#include "core/batch.h"

static inline void bind_apps(batch_t *b, const char *registered, int64_t id)
{
    const char *names[64];
    uint32_t name_of[64];
    int64_t ids[64];
    assert_true(b->count <= 64);
    size_t n = batch_package_names(b, names, name_of);
    for (size_t j = 0; j < n; j++) ids[j] = strcmp(names[j], registered) == 0 ? id : -1;
    batch_bind(b, name_of, ids);
}

#endif
