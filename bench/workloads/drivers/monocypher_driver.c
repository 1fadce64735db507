/* Monocypher, argv[1] rounds of: BLAKE2b and SHA-512 over 1 MB, XChaCha20-Poly1305 encryption
 * and decryption of it, 16 X25519 key exchanges, 8 EdDSA (BLAKE2b) and 8 Ed25519 (SHA-512)
 * signatures made and checked, and one Argon2id hash over 4 MB. Keys and messages come from a
 * fixed seed. Prints a BLAKE2b digest of every result. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "monocypher.h"
#include "monocypher-ed25519.h"

#define MSG (1 << 20)

int main(int argc, char **argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 1;
  uint8_t key[32], nonce[24] = {0}, seed[32], mac[16], digest[64];
  for (int i = 0; i < 32; i++) key[i] = (uint8_t)(i * 7 + 1);
  uint8_t *msg = malloc(MSG), *cipher = malloc(MSG), *plain = malloc(MSG);
  void *work = malloc(4096 * 1024);
  crypto_blake2b_ctx all;
  crypto_blake2b_init(&all, 32);
  for (int r = 0; r < rounds; r++) {
    nonce[0] = (uint8_t)r;
    memset(msg, 0, MSG);
    crypto_chacha20_x(msg, msg, MSG, key, nonce, 0); /* a keystream as the message */

    crypto_blake2b(digest, 64, msg, MSG);
    crypto_blake2b_update(&all, digest, 64);
    crypto_sha512(digest, msg, MSG);
    crypto_blake2b_update(&all, digest, 64);

    crypto_aead_lock(cipher, mac, key, nonce, digest, 16, msg, MSG);
    if (crypto_aead_unlock(plain, mac, key, nonce, digest, 16, cipher, MSG) || memcmp(plain, msg, MSG)) {
      fprintf(stderr, "aead roundtrip failed\n");
      return 1;
    }
    crypto_blake2b_update(&all, mac, 16);

    for (int i = 0; i < 16; i++) {
      uint8_t a_sk[32], b_sk[32], a_pk[32], b_pk[32], s1[32], s2[32];
      memcpy(a_sk, msg + 64 * i, 32);
      memcpy(b_sk, msg + 64 * i + 32, 32);
      crypto_x25519_public_key(a_pk, a_sk);
      crypto_x25519_public_key(b_pk, b_sk);
      crypto_x25519(s1, a_sk, b_pk);
      crypto_x25519(s2, b_sk, a_pk);
      if (memcmp(s1, s2, 32)) { fprintf(stderr, "x25519 mismatch\n"); return 1; }
      crypto_blake2b_update(&all, s1, 32);
    }

    for (int i = 0; i < 8; i++) {
      uint8_t sk[64], pk[32], sig[64];
      const uint8_t *m = msg + 4096 + 1000 * i;
      memcpy(seed, msg + 2048 + 32 * i, 32);
      crypto_eddsa_key_pair(sk, pk, seed);
      crypto_eddsa_sign(sig, sk, m, 1000);
      if (crypto_eddsa_check(sig, pk, m, 1000)) { fprintf(stderr, "eddsa check failed\n"); return 1; }
      crypto_blake2b_update(&all, sig, 64);
      memcpy(seed, msg + 3072 + 32 * i, 32);
      crypto_ed25519_key_pair(sk, pk, seed);
      crypto_ed25519_sign(sig, sk, m, 1000);
      if (crypto_ed25519_check(sig, pk, m, 1000)) { fprintf(stderr, "ed25519 check failed\n"); return 1; }
      crypto_blake2b_update(&all, sig, 64);
    }

    crypto_argon2_config cfg = {CRYPTO_ARGON2_ID, 4096, 3, 1};
    crypto_argon2_inputs in = {msg, msg + 64, 32, 16};
    crypto_argon2(digest, 32, work, cfg, in, crypto_argon2_no_extras);
    crypto_blake2b_update(&all, digest, 32);
  }
  crypto_blake2b_final(&all, digest);
  printf("monocypher %d rounds: ", rounds);
  for (int i = 0; i < 16; i++) printf("%02x", digest[i]);
  printf("\n");
  return 0;
}
