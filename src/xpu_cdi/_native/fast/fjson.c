/* placeholder: being written */
typedef int xf_placeholder_fjson;
