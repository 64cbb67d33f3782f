/* The names users of other trainers type for fabula's keys (Megatron-LM,
 * DeepSpeed-MoE, llm.c, the Hugging Face Trainer). Such a name in a config
 * is refused with the key to use: none is mapped, since few mean exactly
 * what fabula's key means (docs/config.md, "Names from other trainers").
 * Internal to src/config and the "did you mean" of src/cli. */
#ifndef FABULA_CONFIG_CONFIG_ALIAS_H
#define FABULA_CONFIG_CONFIG_ALIAS_H

typedef struct config_alias {
    const char *name;   /* as typed, the last part of a dotted path ("max_steps") */
    const char *origin; /* whose name it is: "Megatron-LM", "llm.c", ... */
    const char *key;    /* fabula's key */
    const char *how;    /* how fabula's key differs, or "" when it means the same */
} config_alias_t;

/* The entry for the last part of `path` (dashes read as underscores:
 * Megatron's --num-layers is num_layers), or NULL. */
const config_alias_t *config_alias_find(const char *path);

/* Every entry, for docs and tests: *n of them. */
const config_alias_t *config_alias_table(int *n);

#endif
