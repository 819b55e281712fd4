/* print — text from the database or from producers, printed so that no byte
 * reaches the terminal raw (DESIGN.md: Operations).
 *
 * One rule for every command: valid UTF-8 is printed as itself, except
 * control characters (C0, DEL, C1), the line and paragraph separators and
 * the bidi and format characters that would steer a terminal or reorder what
 * the reader sees; those are escaped (\n \r \t, \xNN for ASCII, \uNNNN
 * beyond), and so is every byte that is not part of valid UTF-8 (\xNN) and
 * the backslash itself (\\). */
#ifndef STORAGE_PRINT_H
#define STORAGE_PRINT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* Print len bytes of data between double quotes (a quote inside as \"). At
 * most `max_bytes` input bytes (0: all), never half a character; then "..."
 * outside the quotes when something was left out. */
void print_quoted(FILE *out, const void *data, size_t len, size_t max_bytes);

/* The NUL-terminated text s escaped by the same rule, without quotes (a
 * quote is printed as itself). Returns a string the caller frees. */
char *print_escape(const char *s);

/* len bytes as lower-case hex, nothing between them. */
void print_hex(FILE *out, const void *data, size_t len);

#endif
