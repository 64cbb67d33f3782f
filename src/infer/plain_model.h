/* A model for forward passes alone (`fabula generate`, `fabula eval`): its
 * own parameter buffers and no gradient buffer, so reading weights into it
 * costs the weights and the activations, not a training state. */
#ifndef FABULA_INFER_PLAIN_MODEL_H
#define FABULA_INFER_PLAIN_MODEL_H

#include "model/model.h"
#include "ops.h"
#include "parallel/comm.h"

/* model_create_ep with MODEL_NO_GRAD_BUFFER and hooks that hand every
 * block its parameters from the model's own buffers; a backward, which
 * would need a gradient buffer, ends the job (an internal error). ep: as
 * model_create_ep (NULL: all experts here). Its parameters start at zero:
 * fill them (ckpt_read_weights, hf_import_weights) before a forward. */
model_t *plain_model_create(const model_config_t *mc, const ops_t *ops, int max_tokens, comm_t *ep);

#endif
