/* utf8 — well-formed UTF-8, as PostgreSQL and jansson hold it.
 *
 * One definition for every place that must tell valid text from bytes: the
 * decoder repairing a rejection's detail, the log escaping producer strings,
 * the dead-letter commands printing payloads. */
#ifndef STORAGE_UTF8_H
#define STORAGE_UTF8_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The length (1-4) of the well-formed UTF-8 sequence at s, of which `left`
 * bytes may be read, with its code point in *cp; 0 when s does not start
 * one: a stray continuation byte, an overlong form, a surrogate, a code
 * point past U+10FFFF, or a sequence cut short. This function can't fail. */
size_t utf8_sequence(const unsigned char *s, size_t left, uint32_t *cp);

/* Whether the `len` bytes at s are well-formed UTF-8. */
bool utf8_valid(const void *s, size_t len);

#endif
