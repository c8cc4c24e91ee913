"""Tools that explain the kernels: the HBM traffic model (``traffic``), the shared-memory and
register budget (``budget``), SASS and resources compiled for sm_90a without a GPU (``sass``,
with ``sass_flow``'s search for warpgroup MMAs that read an unwritten descriptor), Nsight
Compute profiles (``profile``) and the GPU facts they use (``gpus``). Each module is also a
``flashtriton <command>``; none imports plotting or profiling code at import time."""
