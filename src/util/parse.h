/* Parsing of numbers and byte sizes, shared by the library (PCOLL_* variables)
 * and the tools (command-line flags). */
#ifndef PC_UTIL_PARSE_H
#define PC_UTIL_PARSE_H

#include <stddef.h>
#include <stdint.h>

/* "4096", "64K", "4M", "1G" (binary units, optional trailing B/iB).
 * Returns 0 on success, -1 if malformed or out of range. */
int pc_parse_bytes(const char *text, size_t *out);

/* A whole decimal number in [min, max] (no blanks, no '+'). Returns 0 on
 * success, -1 otherwise. */
int pc_parse_long(const char *text, long min, long max, long *out);

/* A finite decimal number ("2.5", "-1", ".5", "1e3"; no blanks, no '+', no
 * hexadecimal). Returns 0 on success, -1 otherwise. */
int pc_parse_double(const char *text, double *out);

#endif
