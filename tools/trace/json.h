/* A small JSON reader into a tree (values live in an arena that is reset
 * between documents or array elements, so a file of millions of events is
 * read one event at a time), and writer helpers for strings and values.
 * Numbers keep their double value and, when written as an integer that fits,
 * their exact int64 value (clock readings exceed 2^53 nanoseconds). */
#ifndef PCOLL_TRACE_JSON_H
#define PCOLL_TRACE_JSON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "util.h"

typedef enum json_type {
    JSON_NULL,
    JSON_FALSE,
    JSON_TRUE,
    JSON_NUMBER,
    JSON_STRING,
    JSON_ARRAY,
    JSON_OBJECT
} json_type_t;

typedef struct json_value json_value_t;
typedef struct json_member {
    const char *key; /* unescaped, NUL-terminated */
    size_t key_len;
    json_value_t *value;
} json_member_t;

struct json_value {
    json_type_t type;
    union {
        struct {
            double d;
            int64_t i;  /* exact, when is_int */
            int is_int; /* written without fraction or exponent, and fits */
        } num;
        struct {
            const char *s; /* unescaped, NUL-terminated (may hold NUL) */
            size_t len;
        } str;
        struct {
            json_value_t **items;
            size_t n;
        } arr;
        struct {
            json_member_t *members;
            size_t n;
        } obj;
    } u;
    size_t begin, end; /* its text: offsets into the parsed buffer */
};

typedef struct json_arena json_arena_t;
json_arena_t *json_arena_new(void);
void json_arena_reset(json_arena_t *a); /* frees every value, keeps one block */
void json_arena_free(json_arena_t *a);

typedef struct json_parser {
    const char *text; /* NUL-terminated at text[len] */
    size_t len, pos;
    json_arena_t *arena;
    json_value_t **items; /* elements of the arrays being read, innermost last */
    size_t items_len, items_cap;
    json_member_t *members; /* members of the objects being read */
    size_t members_len, members_cap;
    int depth;
    char error[160]; /* why parsing stopped, error_pos where */
    size_t error_pos;
} json_parser_t;

void json_parser_init(json_parser_t *p, const char *text, size_t len, json_arena_t *arena);
void json_parser_done(json_parser_t *p);
/* The value at pos (after whitespace); NULL on an error (p->error). */
json_value_t *json_parse_value(json_parser_t *p);
/* One whole document: a value and nothing but whitespace after it. */
json_value_t *json_parse_document(json_parser_t *p);
/* Skips whitespace; the next character, or -1 at the end. */
int json_peek(json_parser_t *p);
/* Skips whitespace and consumes c, or fails (p->error names what). */
int json_expect(json_parser_t *p, char c);
/* A string at pos into a NUL-terminated copy in the arena. */
int json_parse_string(json_parser_t *p, const char **out, size_t *out_len);
/* 1-based line and column of a byte offset of the parsed text. */
void json_position(const json_parser_t *p, size_t offset, long *line, long *column);

/* Object member lookup (NULL when absent or obj is not an object). */
const json_value_t *json_get(const json_value_t *obj, const char *key);
/* Typed lookups: 0 on success, -1 when absent or not of that type. */
int json_get_int(const json_value_t *obj, const char *key, int64_t *out);
int json_get_number(const json_value_t *obj, const char *key, double *out);
int json_get_string(const json_value_t *obj, const char *key, const char **out);
const char *json_type_name(json_type_t type);

/* Writers: a string with JSON escapes (quotes included), and any value in
 * compact form. */
void json_write_string(strbuf_t *out, const char *s, size_t len);
void json_fwrite_string(FILE *out, const char *s, size_t len);
void json_write_value(strbuf_t *out, const json_value_t *v);
/* A double as a JSON number ("null" for NaN or infinity). */
void json_fwrite_number(FILE *out, double v);

#endif
