/**
 * Whether this process runs from the service's container image (its Dockerfile sets
 * `RBS_CONTAINER=1`): a refusal then names the container's options as the remedy (`docker run
 * --security-opt ...`, `--privileged`), not the machine's.
 */
export const inContainer = (): boolean => process.env.RBS_CONTAINER === "1"
