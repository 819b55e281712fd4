/* hash — the one string hash of the core's tables: FNV-1a, 64 bits, over
 * the whole string (the application cache, the batch's key index). */
#ifndef STORAGE_HASH_H
#define STORAGE_HASH_H

#include <stdint.h>

#define HASH_FNV_OFFSET 14695981039346656037ULL
#define HASH_FNV_PRIME 1099511628211ULL

/* Fold the bytes of `s` into `h` (start with HASH_FNV_OFFSET). */
static inline uint64_t hash_fnv1a(const char *s, uint64_t h)
{
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= HASH_FNV_PRIME;
    }
    return h;
}

#endif
