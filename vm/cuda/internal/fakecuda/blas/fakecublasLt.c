/* fakecublasLt.c: a fake libcublasLt.so.13, the sibling the fake cuBLAS of fakecuda.Install
 * needs (DT_NEEDED), as the real libcublas needs the real libcublasLt. It holds one
 * function, which that cuBLAS calls so that no linker drops the dependency. */
int fakecublasLt_linked(void) { return 1; }
