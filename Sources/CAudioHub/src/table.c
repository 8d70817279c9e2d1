/*
 * The hub's accessories by id: a chained hash table (FNV-1a) of entries its caller allocates and frees, doubling
 * when it holds as many entries as buckets. See hub_private.h.
 */
#include "hub_private.h"

#include <stdlib.h>
#include <string.h>

static size_t hash_id(const char *id)
{
    uint64_t hash = 14695981039346656037ULL;
    for (const unsigned char *c = (const unsigned char *)id; *c != '\0'; c++) {
        hash = (hash ^ *c) * 1099511628211ULL;
    }
    return (size_t)hash;
}

struct ah_entry *ah_table_find(const struct ah_table *table, const char *id)
{
    if (table->bucket_count == 0) {
        return NULL;
    }
    for (struct ah_entry *e = table->buckets[hash_id(id) & (table->bucket_count - 1)]; e != NULL; e = e->next) {
        if (strcmp(e->id, id) == 0) {
            return e;
        }
    }
    return NULL;
}

static bool grow(struct ah_table *table)
{
    size_t count = table->bucket_count == 0 ? 64 : table->bucket_count * 2;
    struct ah_entry **buckets = calloc(count, sizeof *buckets);
    if (buckets == NULL) {
        return false;
    }
    for (size_t i = 0; i < table->bucket_count; i++) {
        struct ah_entry *e = table->buckets[i];
        while (e != NULL) {
            struct ah_entry *next = e->next;
            size_t slot = hash_id(e->id) & (count - 1);
            e->next = buckets[slot];
            buckets[slot] = e;
            e = next;
        }
    }
    free(table->buckets);
    table->buckets = buckets;
    table->bucket_count = count;
    return true;
}

bool ah_table_reserve(struct ah_table *table)
{
    return table->count < table->bucket_count || grow(table);
}

void ah_table_insert(struct ah_table *table, struct ah_entry *entry)
{
    size_t slot = hash_id(entry->id) & (table->bucket_count - 1);
    entry->next = table->buckets[slot];
    table->buckets[slot] = entry;
    table->count++;
}

struct ah_entry *ah_table_next(const struct ah_table *table, size_t *bucket, struct ah_entry *entry)
{
    if (entry != NULL && entry->next != NULL) {
        return entry->next;
    }
    size_t i = entry == NULL ? 0 : *bucket + 1;
    for (; i < table->bucket_count; i++) {
        if (table->buckets[i] != NULL) {
            *bucket = i;
            return table->buckets[i];
        }
    }
    return NULL;
}

void ah_table_free(struct ah_table *table)
{
    free(table->buckets);
    table->buckets = NULL;
    table->bucket_count = 0;
    table->count = 0;
}
