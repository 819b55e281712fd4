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

#include <jansson.h>
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

/* --json output (DESIGN.md: Output for scripts). */

/* A JSON string of the len bytes at data: the text itself when it is valid
 * UTF-8 (JSON escapes any control character), else escaped by the rule
 * above, so a byte that is not UTF-8 reads \xNN; JSON null for NULL data.
 * Returns a new reference. */
json_t *print_json_text(const void *data, size_t len);

/* The same for NUL-terminated text (NULL: JSON null). */
json_t *print_json_string(const char *s);

/* A JSON integer of the decimal text s (a bigint column); JSON null for
 * NULL. */
json_t *print_json_integer(const char *s);

/* Print `doc` on stdout as one JSON document (ASCII only: anything else is
 * a \u escape) and a newline. Takes ownership of doc. Returns 0, or -1 when
 * stdout could not be written. */
int print_json(json_t *doc);

#endif
