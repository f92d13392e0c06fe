package org.compactbert.qa;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import java.io.IOException;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * Answers are whole words, as the Task Library's BertQuestionAnswerer gives them: a span starting
 * on a {@code ##} piece, or ending before its word's last piece, answers the passage's
 * whitespace-delimited words it touches. The same case as tests/test_qa_app.py's
 * test_twin_answers_whole_words, so the app answers as its Python twin.
 */
class WholeWordTest {
  // numb ##ly, [UNK] (U+20000: a word of its own to the tokenizer, not to whitespace) una ##ffa
  // ##ble.
  private static final String PASSAGE =
      "She stared numbly at the \uD840\uDC00unaffable wall, then left.";
  private static final String QUESTION = "How did she stare?";

  /** A span model whose logits peak on two input positions. */
  private static final class PeakRunner implements ModelRunner {
    private final int start;
    private final int end;

    PeakRunner(int start, int end) {
      this.start = start;
      this.end = end;
    }

    @Override
    public int sequenceLength() {
      return 384;
    }

    @Override
    public void run(int[] ids, int[] mask, int[] segmentIds, float[] startLogits,
        float[] endLogits) {
      Arrays.fill(startLogits, 0f);
      Arrays.fill(endLogits, 0f);
      startLogits[start] = 10f;
      endLogits[end] = 10f;
    }
  }

  private static Answer answer(String first, String last) throws IOException {
    WordPieceTokenizer tokenizer = new WordPieceTokenizer(Golden.vocabulary(), true);
    List<String> pieces = Arrays.asList(tokenizer.encode(PASSAGE).pieces());
    int offset = tokenizer.encode(QUESTION).ids().length + 2;
    PeakRunner runner =
        new PeakRunner(offset + pieces.indexOf(first), offset + pieces.indexOf(last));
    return new QuestionAnswerer(tokenizer, runner).answer(PASSAGE, QUESTION).answer();
  }

  private static void assertAnswer(String want, String first, String last) throws IOException {
    Answer a = answer(first, last);
    assertEquals(want, a.text(), first + " .. " + last);
    assertEquals(PASSAGE.indexOf(want), a.start(), want + ": start");
    assertEquals(PASSAGE.indexOf(want) + want.length(), a.end(), want + ": end");
  }

  @Test
  void aSpanOnPartsOfWordsAnswersTheWholeWords() throws IOException {
    assertAnswer("numbly", "##ly", "##ly");
    assertAnswer("numbly at the \uD840\uDC00unaffable", "##ly", "una");
    assertAnswer("\uD840\uDC00unaffable", "##ffa", "##ffa");  // back over a surrogate pair
    assertAnswer("numbly", "numb", "numb");
    assertAnswer("wall,", "wall", "wall");  // punctuation against it too
  }

  @Test
  void wordEdgesAreTheTokenizersWhitespace() {
    String text = "a\tb-c\u00a0d\ne\u2028f\u000bg  h";
    assertArrayEquals(new int[] {2, 5}, AnswerDecoder.wholeWords(text, 3, 4));  // "b-c"
    assertArrayEquals(new int[] {6, 7}, AnswerDecoder.wholeWords(text, 6, 6));  // NBSP ends it
    assertArrayEquals(new int[] {8, 9}, AnswerDecoder.wholeWords(text, 8, 9));
    assertArrayEquals(new int[] {10, 13}, AnswerDecoder.wholeWords(text, 10, 11));  // \v: no edge
    assertArrayEquals(new int[] {15, 16}, AnswerDecoder.wholeWords(text, 15, 16));
    assertArrayEquals(new int[] {15, 16}, AnswerDecoder.wholeWords(text, 16, 15));
    assertArrayEquals(new int[] {0, 0}, AnswerDecoder.wholeWords("", 0, 0));
  }
}
