"""tfmodels.markdown: the reports' one table writer and number format."""

from tfmodels.markdown import number, table


def test_a_table_is_its_header_rule_and_rows():
  assert table(["model", "F1"], [["teacher", 81.9], ("student", "-")]) == [
      "| model | F1 |", "| --- | --- |", "| teacher | 81.9 |",
      "| student | - |"]
  assert table(["a"], iter(())) == ["| a |", "| --- |"]


def test_numbers_round_scale_group_and_say_what_is_missing():
  assert number(81.949) == "81.9"
  assert number(0.8195, 2, scale=100) == "81.95"
  assert number(8451072, 0, thousands=True) == "8,451,072"
  assert number(None) == "-"
  assert number(None, missing="n/a") == "n/a"
  assert number(0) == "0.0"
