"""Which nodes of a LiteRT interpreter a delegate (XNNPACK) took over.

Shared by the benchmark runner and the converter's validation report; no
flags here, so anything can import it.
"""


def delegated_nodes(interpreter):
  """(indices of the nodes delegates took, original nodes, partitions).

  LiteRT keeps the replaced nodes in the node list and appends one DELEGATE
  node per partition, so the replaced ones are found by walking back from
  each partition's outputs through their producers until its inputs.
  """
  ops = interpreter._get_ops_details()  # pylint: disable=protected-access
  original = [op for op in ops if op["op_name"] != "DELEGATE"]
  partitions = [op for op in ops if op["op_name"] == "DELEGATE"]
  producer = {}
  for op in original:
    for tensor in op["outputs"]:
      producer[int(tensor)] = op["index"]
  by_index = {op["index"]: op for op in original}
  replaced = set()
  for partition in partitions:
    boundary = {int(t) for t in partition["inputs"]}
    pending = [int(t) for t in partition["outputs"]]
    while pending:
      tensor = pending.pop()
      node = producer.get(tensor)
      if tensor in boundary or node is None or node in replaced:
        continue
      replaced.add(node)
      pending.extend(int(t) for t in by_index[node]["inputs"] if t >= 0)
  return replaced, original, len(partitions)


def delegate_coverage(interpreter):
  """(replaced nodes, original nodes, partitions) of an allocated interpreter."""
  replaced, original, partitions = delegated_nodes(interpreter)
  return len(replaced), len(original), partitions
