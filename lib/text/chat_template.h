// ChatTemplate: renders a conversation as text segments, each marked whether the training
// loss is taken on its tokens. A spec (the recipe key data.chat_template) is:
//   chatml   every message as <|im_start|>{role}\n{content}<|im_end|>\n
//   llama3   <|begin_of_text|>, then every message as
//            <|start_header_id|>{role}<|end_header_id|>\n\n{content}<|eot_id|>, the content
//            trimmed of surrounding whitespace (as Meta's template does)
//   custom   entries NAME=VALUE separated by ";" (";;" is a literal ";"):
//              ROLE=PREFIX{content}SUFFIX  how a message of that role is written
//              *=PREFIX{content}SUFFIX     any role without an entry of its own
//              begin=TEXT                  written once before the first message
//            {role} in a prefix or suffix is the message's role; \n, \t and \\ are a newline,
//            a tab and a backslash. Example: "user=<|user|>\n{content}<|end|>\n;
//            assistant=<|assistant|>\n{content}<|end|>\n".
// The loss is on messages of role "assistant" only: on the content and on the suffix up to its
// last non-whitespace character (the end-of-turn marker, e.g. <|im_end|>); the whitespace
// after it, the prefixes and every other message carry no loss.
#pragma once
#include <optional>
#include <string>
#include <vector>

namespace xtrain::text {

struct ChatMessage {
  std::string role;
  std::string content;
};

struct TextSegment {
  std::string text;
  bool loss = false;
};

class ChatTemplate {
 public:
  // InputError naming the problem for a malformed spec.
  static ChatTemplate parse(const std::string& spec);

  // Consecutive segments with the same loss flag are joined. A role that the template cannot
  // write is an InputError ("role 'tool' has no entry ...").
  std::vector<TextSegment> render(const std::vector<ChatMessage>& messages) const;
  // The messages' text followed by the assistant's prefix: what a model continues to answer
  // (transformers' add_generation_prompt).
  std::string generation_prompt(const std::vector<ChatMessage>& messages) const;
  // What ends an assistant turn: its suffix without trailing whitespace ("<|im_end|>" for
  // chatml); generation stops there. Empty when the template writes no such marker.
  std::string end_of_turn() const;

 private:
  struct RoleFormat {
    std::string role;  // "*" for any other role
    std::string prefix, suffix;
  };

  const RoleFormat* format_for(const std::string& role) const;

  std::string begin_;
  std::vector<RoleFormat> roles_;
  bool trim_content_ = false;
};

// nullopt when the spec is valid, else the problem.
std::optional<std::string> check_chat_template(const std::string& spec);

}  // namespace xtrain::text
