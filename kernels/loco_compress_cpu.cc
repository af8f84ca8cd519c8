// placeholder: implemented by the kernels work
