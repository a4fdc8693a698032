/* What a model file's [net] section means once its keys are read: Darknet's
 * subdivisions, the schedule's keys checked against its policy, the
 * augmentation resolved (Darknet's crop or RandomResizedCrop), the
 * optimiser's keys against the optimiser, the per-channel values against
 * the input. Private to src/net (model.c calls it when [net] ends). */
#ifndef DTRAIN_NET_MODEL_NET_H
#define DTRAIN_NET_MODEL_NET_H

#include "dtrain/model.h"
#include "layers/layer_keys.h"

/* m: the spec [net]'s keys were read into; p: the section, for its keys'
 * lines and errors (dt_section_error naming the line). */
dt_status dt_model_finish_net(const dt_section *p, dt_model_spec *m);

#endif
