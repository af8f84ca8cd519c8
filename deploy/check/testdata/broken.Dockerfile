# A relative WORKDIR, a lower-case instruction, two CMDs.
# expect: WORKDIR paths should be absolute
# expect: There can only be one CMD instruction
FROM debian:bookworm-slim
workdir app
CMD ["a"]
CMD ["b"]
