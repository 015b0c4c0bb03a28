/* ops.h: generated from ops.go by go generate. DO NOT EDIT. */
#ifndef OOC_OPS_H
#define OOC_OPS_H
#define OOC_UNARY_ABS 0
#define OOC_UNARY_SIGN 1
#define OOC_UNARY_CEIL 2
#define OOC_UNARY_FLOOR 3
#define OOC_UNARY_SIN 4
#define OOC_UNARY_COS 5
#define OOC_UNARY_EXP 6
#define OOC_UNARY_LN 7
#define OOC_UNARY_LOG2 8
#define OOC_UNARY_NEG 9
#define OOC_UNARY_SQUARE 10
#define OOC_UNARY_SQRT 11
#define OOC_UNARY_INV 12
#define OOC_UNARY_INV_SQRT 13
#define OOC_UNARY_CUBE 14
#define OOC_UNARY_TANH 15
#define OOC_UNARY_SIGMOID 16
#define OOC_UNARY_LOG1P 17
#define OOC_UNARY_EXPM1 18
#define OOC_UNARY_SOFTPLUS 19
#define OOC_BINARY_ADD 0
#define OOC_BINARY_SUB 1
#define OOC_BINARY_MUL 2
#define OOC_BINARY_DIV 3
#define OOC_BINARY_POW 4
#define OOC_BINARY_VEC_DIV 5
#define OOC_BINARY_VEC_POW 6
#define OOC_BINARY_LT 7
#define OOC_BINARY_GT 8
#define OOC_BINARY_LTE 9
#define OOC_BINARY_GTE 10
#define OOC_BINARY_EQ 11
#define OOC_BINARY_NE 12
#define OOC_REDUCE_SUM 0
#define OOC_REDUCE_MEAN 1
#define OOC_REDUCE_MAX 2
#define OOC_OPT_L1 1
#define OOC_OPT_L2 2
#define OOC_OPT_BATCH 4
#define OOC_OPT_CLIP 8
#endif
