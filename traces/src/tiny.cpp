#include <vector>
#include <string>
int main(){ std::vector<std::string> v{"a","b"}; return v.size(); }
