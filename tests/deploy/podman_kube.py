#!/usr/bin/env python3
"""Turns a rendered deploy/kubernetes overlay into what `podman kube play`
(podman 4.3) runs, changing only what podman lacks, so that the test runs
the real manifests:

- Controllers become their pods: podman plays no StatefulSet and expands no
  $(VAR) in arguments, so each replica of a StatefulSet or Deployment
  becomes a Pod named as a StatefulSet names it (NAME-0, NAME-1, ...), with
  the $(VAR)s of its command and arguments expanded the way Kubernetes
  would (literal env values, ConfigMaps through envFrom, the downward API's
  metadata.name). The pod name is also its host name on the network.
- The downward API's status.podIP and spec.nodeName are unknown to podman:
  a pod is reached at, and runs on a node named, its pod name.
- volumeClaimTemplates become one PersistentVolumeClaim (podman volume)
  per pod, named as Kubernetes names them (TEMPLATE-POD).
- Services do not exist in podman: an address "SERVICE:PORT" becomes the
  address of the first pod behind it ("chimera-coordinator-0:PORT").
- podman publishes every declared container port on the host, where the
  pods' equal ports collide: only ports named with --publish NAME=HOSTPORT
  stay, published on the host's loopback as a port-forward would.
- Probes become exec probes of `chimera health` (podman turns an httpGet
  probe into a curl the image does not have, and knows no grpc probe).
- Secrets are not played: podman 4.3 reads secretKeyRef values from a
  podman secret holding the Secret's data as a JSON object, so with
  --secrets DIR each Secret's data is written to DIR/NAME.json for
  `podman secret create NAME DIR/NAME.json`.
- Kinds podman ignores (Service, PodDisruptionBudget, ...) are dropped.
- --image NAME runs another build of the image.

  kubectl kustomize OVERLAY | podman_kube.py --publish grpc=50051 > play.yaml
"""
import argparse
import copy
import json
import os
import re
import sys

import yaml

CONTROLLERS = ("StatefulSet", "Deployment")
# Downward API fields podman does not know, and what stands in for them.
POD_NAME_FIELDS = ("metadata.name", "status.podIP", "spec.nodeName")


def service_pods(objects):
    """Service name -> the first pod of the controller its selector picks."""
    names = {}
    for service in (o for o in objects if o["kind"] == "Service"):
        selector = service["spec"].get("selector", {})
        for controller in (o for o in objects if o["kind"] in CONTROLLERS):
            labels = controller["spec"]["template"]["metadata"].get("labels", {})
            if selector and all(labels.get(k) == v for k, v in selector.items()):
                names[service["metadata"]["name"]] = f"{controller['metadata']['name']}-0"
    return names


def environment(container, pod_name, config_maps):
    """What $(VAR) means in the container's command and arguments."""
    values = {}
    for source in container.get("envFrom", []):
        name = source.get("configMapRef", {}).get("name")
        values.update(config_maps.get(name, {}))
    for variable in container.get("env", []):
        field = variable.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
        if "value" in variable:
            values[variable["name"]] = variable["value"]
        elif field in POD_NAME_FIELDS:
            values[variable["name"]] = pod_name
    return values


def as_health_command(probe, port_numbers):
    """The probe, asking `chimera health` what it asked over HTTP or gRPC."""
    timing = {k: v for k, v in probe.items() if k not in ("httpGet", "grpc")}
    if "grpc" in probe:
        port = port_numbers.get(probe["grpc"]["port"], probe["grpc"]["port"])
        command = ["chimera", "health", f"--address=127.0.0.1:{port}"]
    else:
        port = port_numbers.get(probe["httpGet"]["port"], probe["httpGet"]["port"])
        command = ["chimera", "health", f"--http=127.0.0.1:{port}"]
    return dict(timing, exec={"command": command})


def adapt_container(container, pod_name, context):
    if context.image:
        container["image"] = context.image
    values = environment(container, pod_name, context.config_maps)

    def expand(argument):
        argument = re.sub(r"\$\((\w+)\)", lambda m: values.get(m[1], m[0]), argument)
        for service, pod in context.services.items():
            argument = re.sub(rf"(?<![\w.-]){re.escape(service)}:", f"{pod}:", argument)
        return argument

    for key in ("command", "args"):
        if key in container:
            container[key] = [expand(a) for a in container[key]]
    container["env"] = [
        v for v in container.get("env", [])
        if v.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
        not in ("status.podIP", "spec.nodeName")]
    numbers = {p.get("name"): p["containerPort"] for p in container.get("ports", [])}
    for kind in ("livenessProbe", "readinessProbe", "startupProbe"):
        if kind in container:
            container[kind] = as_health_command(container[kind], numbers)
    container["ports"] = [
        dict(port, hostPort=context.publish[port["name"]], hostIP="127.0.0.1")
        for port in container.get("ports", []) if port.get("name") in context.publish]


def controller_pods(controller, context):
    """The controller's replicas as Pods, with their claims before them."""
    name = controller["metadata"]["name"]
    template = controller["spec"]["template"]
    played = []
    for index in range(controller["spec"].get("replicas", 1)):
        pod_name = f"{name}-{index}"
        spec = copy.deepcopy(template["spec"])
        for claim in controller["spec"].get("volumeClaimTemplates", []):
            claim_name = f"{claim['metadata']['name']}-{pod_name}"
            played.append({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                           "metadata": {"name": claim_name}, "spec": claim["spec"]})
            spec.setdefault("volumes", []).append(
                {"name": claim["metadata"]["name"],
                 "persistentVolumeClaim": {"claimName": claim_name}})
        for container in spec.get("initContainers", []) + spec["containers"]:
            adapt_container(container, pod_name, context)
        played.append({"apiVersion": "v1", "kind": "Pod",
                       "metadata": {"name": pod_name,
                                    "labels": template["metadata"].get("labels", {})},
                       "spec": spec})
    return played


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--publish", action="append", default=[],
                        help="PORTNAME=HOSTPORT: publish that named container port")
    parser.add_argument("--image", help="image of every container")
    parser.add_argument("--secrets", help="folder for the Secrets' data")
    context = parser.parse_args()
    context.publish = {name: int(port) for name, _, port in
                       (item.partition("=") for item in context.publish)}

    objects = [o for o in yaml.safe_load_all(sys.stdin) if o]
    context.services = service_pods(objects)
    context.config_maps = {o["metadata"]["name"]: o.get("data", {})
                           for o in objects if o["kind"] == "ConfigMap"}
    played = []
    for item in objects:
        if item["kind"] in CONTROLLERS:
            played.extend(controller_pods(item, context))
        elif item["kind"] in ("ConfigMap", "PersistentVolumeClaim"):
            played.append(item)
        elif item["kind"] == "Secret" and context.secrets:
            path = os.path.join(context.secrets, item["metadata"]["name"] + ".json")
            with open(path, "w") as out:
                json.dump(item.get("data", {}), out)
    yaml.safe_dump_all(played, sys.stdout, sort_keys=False)


if __name__ == "__main__":
    main()
