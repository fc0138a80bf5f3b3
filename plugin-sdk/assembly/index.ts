// The Witness Kernel plugin SDK: JSON codec, host-function wrappers, typed stage entry points.
export * from "./json"
export * from "./host"
export * from "./stages"
export * from "./paths"
