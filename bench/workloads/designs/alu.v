module top(input clk, input [2:0] op, input [15:0] a, input [15:0] b, output reg [15:0] y, output reg z);
  always @(posedge clk) begin
    case (op)
      3'd0: y <= a + b;
      3'd1: y <= a - b;
      3'd2: y <= a & b;
      3'd3: y <= a | b;
      3'd4: y <= a ^ b;
      3'd5: y <= a << b[3:0];
      3'd6: y <= a >> b[3:0];
      default: y <= a * b;
    endcase
    z <= (y == 16'd0);
  end
endmodule
