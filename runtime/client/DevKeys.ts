import nacl from "tweetnacl"
import { createHash } from "node:crypto"

/**
 * Deterministic development keys: the seed is sha256 of a fixed prefix and the principal name.
 * The example profiles register these public keys so the README's examples work out of the
 * box. Anyone can derive them: never register them in a real deployment.
 */
export const devKeyPair = (principal: string): nacl.SignKeyPair =>
  nacl.sign.keyPair.fromSeed(createHash("sha256").update(`witness-kernel dev key v1:${principal}`).digest())

export const devPublicKey = (principal: string): string => Buffer.from(devKeyPair(principal).publicKey).toString("base64")
