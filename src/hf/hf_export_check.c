/* hf/hf_export.h: hf_export_check_tokenizer. */
#include "hf/hf_export.h"

#include <jansson.h>
#include <stdlib.h>

#include "ckpt/ckpt.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_match.h"

void hf_export_check_tokenizer(const hf_export_opts_t *o)
{
    char *text = NULL, why[1024];
    long step;
    /* an unreadable checkpoint is the export's to report */
    if (ckpt_read_config(o->checkpoint, &text, &step, why, sizeof why) != 0)
        return;
    json_error_t err;
    json_t *root = json_loads(text, 0, &err);
    free(text);
    json_t *data = json_object_get(root, "data");
    const char *trained = json_string_value(json_object_get(data, "tokenizer"));
    const char *corpus = json_string_value(json_object_get(data, "corpus"));
    tokenizer_t *tok = tokenizer_load(o->tokenizer);
    tokenizer_check_match(o->checkpoint, trained, corpus, tok, o->tokenizer);
    tokenizer_free(tok);
    json_decref(root);
}
