"""AdamWReference: the parameter servers' AdamW in numpy, float32, in the
order of kernels/adamw_cpu.cc, so that a cluster's parameters can be
checked against it to float32 rounding.

Per step t (1-based), with the hyperparameters rounded to float32 as the
servers hold them:
    host, in double, rounded to float32 once:
        step_size = lr / (1 - beta1^t),   bc2_sqrt = sqrt(1 - beta2^t)
    host, in float32: decay = 1 - lr*wd, omb1 = 1 - beta1, omb2 = 1 - beta2
    per element, float32:
        p = p * decay                      (decoupled weight decay)
        m = beta1*m + omb1*g
        v = beta2*v + omb2*(g*g)
        p = p - step_size * (m / (sqrt(v) / bc2_sqrt + eps))   (eps outside the sqrt)
The gradient is the mean of the workers' gradients, as the servers form it
(kernels/decode_accumulate.h): their float32 sum times float32(1/n).
"""

import math

import numpy as np

F32 = np.float32


def mean_gradient(grads):
    """The servers' mean of float32 gradients: summed in order, then scaled
    by float32(1/n) (a single gradient is taken as it is)."""
    total = grads[0].astype(F32, copy=True)
    for g in grads[1:]:
        total = total + g
    if len(grads) > 1:
        total = total * F32(1.0 / len(grads))
    return total


class AdamWReference:
    def __init__(self, params, lr, betas, eps, weight_decay):
        self.params = np.array(params, dtype=F32, copy=True)
        self.m = np.zeros_like(self.params)
        self.v = np.zeros_like(self.params)
        self.t = 0
        self.lr = F32(lr)
        self.beta1 = F32(betas[0])
        self.beta2 = F32(betas[1])
        self.eps = F32(eps)
        self.weight_decay = F32(weight_decay)

    def step(self, grad):
        self.t += 1
        t = self.t
        step_size = F32(float(self.lr) / (1.0 - float(self.beta1) ** t))
        bc2_sqrt = F32(math.sqrt(1.0 - float(self.beta2) ** t))
        decay = F32(1.0) - self.lr * self.weight_decay
        omb1 = F32(1.0) - self.beta1
        omb2 = F32(1.0) - self.beta2
        g = grad.astype(F32, copy=False)
        decayed = self.params * decay
        self.m = self.beta1 * self.m + omb1 * g
        self.v = self.beta2 * self.v + omb2 * (g * g)
        denom = np.sqrt(self.v) / bc2_sqrt + self.eps
        self.params = decayed - step_size * (self.m / denom)
        return self.params
