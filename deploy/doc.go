// Package deploy holds no Go code of dirgate: it is the home of the container image
// (Dockerfile), the Kubernetes manifests (kubernetes/), the local try-out
// (compose.yaml, samba/, otel-collector.yaml) and of the tests that keep them
// correct without a container engine or a cluster: the image builds the way `make
// build` does, every manifest decodes strictly against the Kubernetes API types,
// every reference between them resolves, and every setting they use exists.
package deploy
