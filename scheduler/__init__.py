"""The kubeling scheduler: kube-scheduler's framework (profiles, extension points, in-tree and
out-of-tree plugins, the scheduling queue, preemption, extenders) as a service with leader election."""
