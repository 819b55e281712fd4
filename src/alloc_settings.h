/* alloc_settings — glibc's allocator, set for the records' memory
 * (DESIGN.md: Settings and budgets). librdkafka decompresses each fetched
 * message set (hundreds of KiB) on a broker thread and the worker frees it
 * once its records are stored. Two settings decide what that costs:
 *
 * - the mmap threshold, fixed at 1 MiB: a set below it comes from a heap
 *   and its pages are used again by the next set; above it, each set would
 *   be mapped, faulted in page by page while decompressed and unmapped when
 *   freed (fixed at 128 KiB, that was half of librdkafka's CPU per record);
 * - the trim threshold, 4 MiB: a heap keeps at most this much free memory
 *   at its top for the next sets and returns the rest, so the resident size
 *   stays bounded; each broker thread allocates from a heap of its own, so
 *   three brokers may hold 12 MiB free (8 MiB kept more of the CPU saving,
 *   but peaked at 68 MiB of RSS, past the 64 MiB budget; glibc's own default
 *   lets both thresholds grow with the largest block freed, to 65 MiB).
 *
 * Called first thing in main, before any thread starts; bench/consumer_floor
 * calls it too, so that the floor reads Kafka as the service does. */
#ifndef STORAGE_ALLOC_SETTINGS_H
#define STORAGE_ALLOC_SETTINGS_H

#include <malloc.h>

#define ALLOC_MMAP_THRESHOLD (1024 * 1024)
#define ALLOC_TRIM_THRESHOLD (4 * 1024 * 1024)

static inline void alloc_settings_apply(void)
{
    mallopt(M_MMAP_THRESHOLD, ALLOC_MMAP_THRESHOLD);
    mallopt(M_TRIM_THRESHOLD, ALLOC_TRIM_THRESHOLD);
}

#endif
