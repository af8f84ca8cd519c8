#!/usr/bin/env python3
"""Writes the fuzzers' seed corpus (fuzz/corpus/<target>/): small valid
inputs of each codec and request, encoded by hand from the wire format of
proto/loco.proto (no protobuf module needed). Deterministic: rerunning it
rewrites the same files. Usage: fuzz/make_corpus.py [corpus_dir]"""
import os
import random
import struct
import sys
import zlib

CODEC_FP32, CODEC_BF16, CODEC_BLOCK_QUANT = 1, 2, 3


def varint(v):
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def vfield(num, v):
    return varint(num << 3) + varint(v) if v else b""  # proto3 omits zeros


def bfield(num, b):
    return varint((num << 3) | 2) + varint(len(b)) + b if b else b""


def payload(codec, length, offset=0, bits=0, block=0, rng=None):
    rng = rng or random.Random(length * 31 + codec)
    if codec == CODEC_FP32:
        data = struct.pack("<%df" % length, *[rng.uniform(-1, 1) for _ in range(length)])
        scales = b""
    elif codec == CODEC_BF16:
        data = b"".join(struct.pack("<f", rng.uniform(-1, 1))[2:] for _ in range(length))
        scales = b""
    else:
        data = bytes(rng.randrange(256) for _ in range((length * bits + 7) // 8))
        blocks = (length + block - 1) // block
        scales = struct.pack("<%df" % blocks, *[rng.uniform(0, 0.1) for _ in range(blocks)])
    return (vfield(1, codec) + vfield(2, bits) + vfield(3, block) + vfield(4, offset) +
            vfield(5, length) + bfield(6, scales) + bfield(7, data))


def write(root, target, name, data):
    d = os.path.join(root, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "corpus")
    # payload_fuzz: the fixed range is [128, 1128); also small self-described ranges.
    write(root, "payload_fuzz", "fp32_1000", payload(CODEC_FP32, 1000, 128))
    write(root, "payload_fuzz", "bf16_1000", payload(CODEC_BF16, 1000, 128))
    for bits in (2, 4, 8):
        for block in (32, 128, 4096):
            write(root, "payload_fuzz", "q%d_b%d_1000" % (bits, block),
                  payload(CODEC_BLOCK_QUANT, 1000, 128, bits, block))
    write(root, "payload_fuzz", "q4_b32_70", payload(CODEC_BLOCK_QUANT, 70, 0, 4, 32))
    write(root, "payload_fuzz", "fp32_5", payload(CODEC_FP32, 5, 7))
    write(root, "payload_fuzz", "bf16_3", payload(CODEC_BF16, 3, 0))

    # request_fuzz: byte 0 = kind | start << 2 (fuzz/request_fuzz.cc); the
    # fake cluster has members {1, 2} and one shard of 300 elements.
    PUSH, INIT, PULL, STATUS = 0, 1, 2, 3
    READY, EMPTY, RESTORED = 0, 1, 2

    def push(worker, step, grad):
        return vfield(1, worker) + vfield(3, step) + bfield(4, grad)

    def req(kind, start, body):
        return bytes([kind | (start << 2)]) + body

    q4 = payload(CODEC_BLOCK_QUANT, 300, 0, 4, 128)
    write(root, "request_fuzz", "push_completes", req(PUSH, READY, push(2, 0, q4)))
    write(root, "request_fuzz", "push_duplicate", req(PUSH, READY, push(1, 0, q4)))
    write(root, "request_fuzz", "push_q2", req(PUSH, READY, push(2, 0, payload(CODEC_BLOCK_QUANT, 300, 0, 2, 32))))
    write(root, "request_fuzz", "push_q8", req(PUSH, READY, push(2, 0, payload(CODEC_BLOCK_QUANT, 300, 0, 8, 4096))))
    write(root, "request_fuzz", "push_bf16", req(PUSH, READY, push(2, 0, payload(CODEC_BF16, 300))))
    write(root, "request_fuzz", "push_fp32", req(PUSH, READY, push(2, 0, payload(CODEC_FP32, 300))))
    write(root, "request_fuzz", "push_stranger", req(PUSH, READY, push(9, 0, q4)))
    write(root, "request_fuzz", "push_restored_ahead", req(PUSH, RESTORED, push(2, 9, q4)))
    write(root, "request_fuzz", "push_uninitialised", req(PUSH, EMPTY, push(2, 0, q4)))
    write(root, "request_fuzz", "init", req(INIT, EMPTY, vfield(1, 1) + bfield(3, payload(CODEC_FP32, 300))))
    write(root, "request_fuzz", "init_again", req(INIT, READY, vfield(1, 2) + bfield(3, payload(CODEC_FP32, 300))))
    write(root, "request_fuzz", "pull_full", req(PULL, READY, vfield(1, 1) + vfield(7, 1)))
    write(root, "request_fuzz", "pull_ahead", req(PULL, READY, vfield(1, 1) + vfield(3, 4) + vfield(4, 100)))
    write(root, "request_fuzz", "pull_have", req(PULL, RESTORED, vfield(1, 1) + vfield(5, 4) + vfield(6, 1)))
    write(root, "request_fuzz", "status", req(STATUS, READY, b""))
    write(root, "request_fuzz", "status_wrong_shard", req(STATUS, EMPTY, vfield(1, 3)))

    # pull_answer_fuzz: byte 0 = slice size - 1, then a PullResponse
    # (version 1, params 2, is_delta 3).
    def answer(slice_size, version, body, is_delta):
        return bytes([slice_size - 1]) + vfield(1, version) + bfield(2, body) + vfield(3, is_delta)

    write(root, "pull_answer_fuzz", "delta_q4_b256_1000",
          answer(7, 5, payload(CODEC_BLOCK_QUANT, 1000, 64, 4, 256), 1))
    write(root, "pull_answer_fuzz", "delta_q8_b32_70",
          answer(1, 2, payload(CODEC_BLOCK_QUANT, 70, 0, 8, 32), 1))
    write(root, "pull_answer_fuzz", "delta_q2_b128_300",
          answer(64, 9, payload(CODEC_BLOCK_QUANT, 300, 0, 2, 128), 1))
    write(root, "pull_answer_fuzz", "fp32_100", answer(5, 3, payload(CODEC_FP32, 100, 8), 0))
    write(root, "pull_answer_fuzz", "bf16_101", answer(3, 3, payload(CODEC_BF16, 101, 8), 0))

    # push_stream_fuzz: [2-byte length][PushChunk] per chunk (header 1, data
    # 2, placed 3, data_offset 4, scales 5, scales_offset 6); the shard holds
    # 1000 elements.
    def chunk(body):
        return struct.pack("<H", len(body)) + body

    def header(grad_without_bytes):
        return bfield(1, vfield(1, 1) + vfield(2, 0) + vfield(3, 4) + bfield(4, grad_without_bytes))

    def placed_stream(codec, length, bits, block, cuts):
        rng = random.Random(length + bits)
        per = {CODEC_FP32: 4, CODEC_BF16: 2}.get(codec)
        data_len = per * length if per else (length * bits + 7) // 8
        blocks = (length + block - 1) // block if not per else 0
        data = bytes(rng.randrange(256) for _ in range(data_len))
        scales = struct.pack("<%df" % blocks, *[rng.uniform(0, 0.1) for _ in range(blocks)])
        head = vfield(1, codec) + vfield(2, bits) + vfield(3, block) + vfield(5, length)
        out = chunk(header(head) + vfield(3, 1))
        edges = sorted(set([0, length] + cuts), reverse=True)
        for end, begin in zip(edges, edges[1:]):  # the end of the shard first
            d0, d1 = (per * begin, per * end) if per else (begin * bits // 8, (end * bits + 7) // 8)
            body = vfield(4, d0) + bfield(2, data[d0:d1])
            if blocks:
                s0, s1 = 4 * (begin // block), 4 * ((end + block - 1) // block)
                body += vfield(6, s0) + bfield(5, scales[s0:s1])
            out += chunk(body)
        return out

    write(root, "push_stream_fuzz", "placed_q4_b128_1000",
          placed_stream(CODEC_BLOCK_QUANT, 1000, 4, 128, [256, 640]))
    write(root, "push_stream_fuzz", "placed_q2_b32_70",
          placed_stream(CODEC_BLOCK_QUANT, 70, 2, 32, [32]))
    write(root, "push_stream_fuzz", "placed_fp32_100", placed_stream(CODEC_FP32, 100, 0, 0, [7, 50]))
    write(root, "push_stream_fuzz", "placed_bf16_99", placed_stream(CODEC_BF16, 99, 0, 0, [33]))
    rng = random.Random(5)
    codes = bytes(rng.randrange(256) for _ in range(500))
    scales = struct.pack("<8f", *[rng.uniform(0, 0.1) for _ in range(8)])
    head = vfield(1, CODEC_BLOCK_QUANT) + vfield(2, 4) + vfield(3, 128) + vfield(5, 1000) + bfield(6, scales)
    write(root, "push_stream_fuzz", "in_order_q4_b128_1000",
          chunk(header(head) + bfield(2, codes[:200])) + chunk(bfield(2, codes[200:])))

    # pull_parts_fuzz: byte 0 = slice size - 1, then [2-byte length][PullChunk]
    # per chunk (header 1: a PullResponse without body, data 2, data_offset 3,
    # scales 4, scales_offset 5); the shard holds 1000 elements.
    def pull_parts(codec, length, bits, block, cuts, version=4):
        rng = random.Random(length * 3 + bits)
        per = {CODEC_FP32: 4, CODEC_BF16: 2}.get(codec)
        data_len = per * length if per else (length * bits + 7) // 8
        blocks = (length + block - 1) // block if not per else 0
        data = bytes(rng.randrange(256) for _ in range(data_len))
        scales = struct.pack("<%df" % blocks, *[rng.uniform(0, 0.1) for _ in range(blocks)])
        head = bfield(1, vfield(1, version) + bfield(2, vfield(1, codec) + vfield(2, bits) +
                                                     vfield(3, block) + vfield(5, length)) +
                      vfield(3, 1 if codec == CODEC_BLOCK_QUANT else 0))
        out = bytes([6])
        edges = sorted(set([0, length] + cuts))
        for i, (begin, end) in enumerate(zip(edges, edges[1:])):
            d0, d1 = (per * begin, per * end) if per else (begin * bits // 8, (end * bits + 7) // 8)
            body = (head if i == 0 else b"") + bfield(2, data[d0:d1]) + vfield(3, d0)
            if blocks:
                s0, s1 = 4 * (begin // block), 4 * ((end + block - 1) // block)
                body += bfield(4, scales[s0:s1]) + vfield(5, s0)
            out += chunk(body)
        return out

    write(root, "pull_parts_fuzz", "delta_q4_b128_1000", pull_parts(CODEC_BLOCK_QUANT, 1000, 4, 128, [256, 640]))
    write(root, "pull_parts_fuzz", "delta_q8_b32_70", pull_parts(CODEC_BLOCK_QUANT, 70, 8, 32, [32]))
    write(root, "pull_parts_fuzz", "fp32_100", pull_parts(CODEC_FP32, 100, 0, 0, [50]))
    write(root, "pull_parts_fuzz", "bf16_99", pull_parts(CODEC_BF16, 99, 0, 0, [33, 66]))

    # checkpoint_fuzz: checkpoint files (server/checkpoint.h): "LOCOCKPT",
    # format, shard id, offset, length, version, replica length, (format 2)
    # model size, params, m, v, replica, CRC-32 of all before it.
    def checkpoint(fmt, offset, length, version, replica, total):
        rng = random.Random(length * 7 + fmt)
        head = b"LOCOCKPT" + struct.pack("<IIQQQQ", fmt, 1, offset, length, version,
                                         length if replica else 0)
        if fmt >= 2:
            head += struct.pack("<Q", total)
        vectors = (4 if replica else 3) * length
        body = head + struct.pack("<%df" % vectors, *[rng.uniform(-1, 1) for _ in range(vectors)])
        return body + struct.pack("<I", zlib.crc32(body))

    # Byte 0 is the target's mode: 1 = it fixes up the CRC (fuzz/checkpoint_fuzz.cc).
    FIX_CRC, AS_IS = b"\x01", b"\x00"
    write(root, "checkpoint_fuzz", "v2_replica_5", FIX_CRC + checkpoint(2, 128, 5, 7, True, 1000))
    write(root, "checkpoint_fuzz", "v2_40", FIX_CRC + checkpoint(2, 0, 40, 3, False, 40))
    write(root, "checkpoint_fuzz", "v2_unknown_model_3",
          FIX_CRC + checkpoint(2, 64, 3, 1, False, 0))
    write(root, "checkpoint_fuzz", "v1_replica_6", FIX_CRC + checkpoint(1, 32, 6, 9, True, 0))
    write(root, "checkpoint_fuzz", "v2_as_is_7", AS_IS + checkpoint(2, 0, 7, 2, True, 7))


if __name__ == "__main__":
    main()
