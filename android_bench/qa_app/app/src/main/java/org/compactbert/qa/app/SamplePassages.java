package org.compactbert.qa.app;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import org.json.JSONArray;
import org.json.JSONException;
import org.json.JSONObject;

/**
 * The shipped sample passages (assets/sample_passages.json, made from the WordNet QA dev set by
 * {@code python -m android_bench.qa_app.sample_passages}), each with sample questions.
 */
final class SamplePassages {
  static final String ASSET = "sample_passages.json";

  static final class Passage {
    final String title;
    final String text;
    final List<String> questions;
    final List<String> answers;

    Passage(String title, String text, List<String> questions, List<String> answers) {
      this.title = title;
      this.text = text;
      this.questions = Collections.unmodifiableList(questions);
      this.answers = Collections.unmodifiableList(answers);
    }

    @Override
    public String toString() {  // what the passage spinner shows
      return title;
    }
  }

  private SamplePassages() {}

  static List<Passage> read(InputStream in) throws IOException {
    ByteArrayOutputStream bytes = new ByteArrayOutputStream();
    byte[] buffer = new byte[8192];
    int n;
    while ((n = in.read(buffer)) != -1) {
      bytes.write(buffer, 0, n);
    }
    try {
      JSONArray passages = new JSONObject(new String(bytes.toByteArray(), StandardCharsets.UTF_8))
          .getJSONArray("passages");
      List<Passage> out = new ArrayList<>();
      for (int i = 0; i < passages.length(); i++) {
        JSONObject p = passages.getJSONObject(i);
        JSONArray qs = p.getJSONArray("questions");
        List<String> questions = new ArrayList<>();
        List<String> answers = new ArrayList<>();
        for (int k = 0; k < qs.length(); k++) {
          questions.add(qs.getJSONObject(k).getString("question"));
          answers.add(qs.getJSONObject(k).getString("answer"));
        }
        out.add(new Passage(p.getString("title"), p.getString("passage"), questions, answers));
      }
      return out;
    } catch (JSONException e) {
      throw new IOException(ASSET + ": " + e.getMessage(), e);
    }
  }
}
